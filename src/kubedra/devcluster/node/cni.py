"""`kubedra-bridge` and `loopback`: the real node's CNI plugins (the CNI spec's ADD, DEL,
CHECK, VERSION, STATUS and GC), the least that gives pods a working network.

containerd runs them with the CNI environment (CNI_COMMAND, CNI_CONTAINERID, CNI_NETNS,
CNI_IFNAME) and the network's configuration on stdin. `loopback` brings `lo` up in the
pod's namespace. `kubedra-bridge` gives the pod one address of the node's pod range: a veth
pair made inside the pod's namespace (its end named CNI_IFNAME) with the other end moved to
the node's namespace and attached to the bridge the agent made; the default route goes
through the bridge, where the node routes and NATs. Addresses are files in `stateDir`, one
per address, created exclusively, so concurrent ADDs never share one; DEL frees it.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

VERSIONS = ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"]


class CniError(Exception):
    """Reported to the runtime as the CNI error result (code 999: plugin-specific)."""


def main(plugin: str) -> int:
    command = os.environ.get("CNI_COMMAND", "")
    config: dict[str, Any] = json.loads(sys.stdin.read() or "{}")
    version = str(config.get("cniVersion", "1.0.0"))
    try:
        result = _dispatch(plugin, command, config)
    except (CniError, subprocess.CalledProcessError, OSError) as err:
        json.dump({"cniVersion": version, "code": 999, "msg": str(err)}, sys.stdout)
        return 1
    if result is not None:
        json.dump({"cniVersion": version, **result}, sys.stdout)
    return 0


def _dispatch(plugin: str, command: str, config: dict[str, Any]) -> dict[str, Any] | None:
    if command == "VERSION":
        return {"supportedVersions": VERSIONS}
    if command in ("CHECK", "STATUS", "GC"):
        return None
    netns, ifname = os.environ.get("CNI_NETNS", ""), os.environ.get("CNI_IFNAME", "eth0")
    container = os.environ.get("CNI_CONTAINERID", "")
    if plugin == "loopback":
        if command == "ADD":
            return _loopback(netns)
        return None
    state = Path(config["stateDir"])
    if command == "ADD":
        return _add(config, state, container, netns, ifname)
    if command == "DEL":
        _delete(state, container)
        return None
    raise CniError(f"unknown CNI_COMMAND {command!r}")


def _loopback(netns: str) -> dict[str, Any]:
    _in(netns, "ip", "link", "set", "lo", "up")
    return {
        "interfaces": [{"name": "lo", "mac": "00:00:00:00:00:00", "sandbox": netns}],
        "ips": [{"address": "127.0.0.1/8", "interface": 0}],
    }


def _add(
    config: dict[str, Any], state: Path, container: str, netns: str, ifname: str
) -> dict[str, Any]:
    subnet = ipaddress.ip_network(config["subnet"])
    gateway = str(config["gateway"])
    address = _claim(state, subnet, gateway, container)
    peer = _peer_name(container)
    # Made in the pod's namespace, the node's end sent to this process's (the node's).
    _in(netns, "ip", "link", "add", ifname, "type", "veth", "peer", "name", peer,
        "netns", str(os.getpid()))  # fmt: skip
    _run("ip", "link", "set", peer, "master", str(config["bridge"]), "up")
    _in(netns, "ip", "addr", "add", f"{address}/{subnet.prefixlen}", "dev", ifname)
    _in(netns, "ip", "link", "set", ifname, "up")
    _in(netns, "ip", "route", "add", "default", "via", gateway)
    return {
        "interfaces": [
            {"name": peer, "mac": _mac(None, peer)},
            {"name": ifname, "mac": _mac(netns, ifname), "sandbox": netns},
        ],
        "ips": [{"address": f"{address}/{subnet.prefixlen}", "gateway": gateway, "interface": 1}],
        "routes": [{"dst": "0.0.0.0/0", "gw": gateway}],
        "dns": {},
    }


def _delete(state: Path, container: str) -> None:
    """Idempotent, as the spec asks: a second DEL, or one after a failed ADD, succeeds."""
    for lease in state.glob("*") if state.is_dir() else ():
        if lease.read_text() == container:
            lease.unlink(missing_ok=True)
    subprocess.run(["ip", "link", "del", _peer_name(container)], capture_output=True)


def _claim(state: Path, subnet: ipaddress.IPv4Network | ipaddress.IPv6Network, gateway: str,
           container: str) -> str:  # fmt: skip
    state.mkdir(parents=True, exist_ok=True)
    for lease in state.glob("*"):
        if lease.read_text() == container:
            return lease.name  # a retried ADD keeps its address
    for host in subnet.hosts():
        if str(host) == gateway:
            continue
        try:
            fd = os.open(state / str(host), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w") as written:
            written.write(container)
        return str(host)
    raise CniError(f"no free address left in {subnet}")


def _peer_name(container: str) -> str:
    return f"kv{container[:12]}"


def _mac(netns: str | None, ifname: str) -> str:
    """The interface's hardware address, from `ip` (sysfs shows the namespace it was
    mounted in, not the one entered)."""
    command = ["ip", "-o", "link", "show", "dev", ifname]
    if netns is not None:
        command = ["nsenter", f"--net={netns}", *command]
    words = subprocess.run(command, capture_output=True, text=True, check=True).stdout.split()
    return words[words.index("link/ether") + 1] if "link/ether" in words else ""


def _in(netns: str, *command: str) -> None:
    _run("nsenter", f"--net={netns}", *command)


def _run(*command: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise CniError(f"{' '.join(command)}: {done.stderr.strip()}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
