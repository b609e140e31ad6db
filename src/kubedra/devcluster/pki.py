"""Certificates and credentials of a local control plane, made with the `openssl` command.

A private CA signs the API server's serving certificate (for 127.0.0.1 and the in-cluster
names), so kubeconfigs verify TLS as on a real cluster instead of skipping it. Users
authenticate with static bearer tokens (the API server's `--token-auth-file`): the admin
in `system:masters`, and the controller manager and scheduler under the user names their
built-in RBAC roles are bound to. A key pair signs service-account tokens.
"""

from __future__ import annotations

import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from kubedra.errors import KubedraError

SERVING_NAMES = (
    "DNS:localhost",
    "DNS:kubernetes",
    "DNS:kubernetes.default",
    "DNS:kubernetes.default.svc",
    "DNS:kubernetes.default.svc.cluster.local",
    "IP:127.0.0.1",
    "IP:10.0.0.1",
)
REAL_NODE = "real-0"  # the name of the dev cluster's real node
# name -> (user, groups) of each static token identity.
IDENTITIES = {
    "admin": ("kubedra-admin", "system:masters"),
    "controller-manager": ("system:kube-controller-manager", ""),
    "scheduler": ("system:kube-scheduler", ""),
    # Authenticated, with no RBAC grant of its own: what a user sees before an admin binds a
    # role (tests give it narrow roles to check "forbidden" answers).
    "user": ("kubedra-user", ""),
    # The real node's kubelet, which the Node authorizer allows its own node's objects.
    "node": (f"system:node:{REAL_NODE}", "system:nodes"),
}


@dataclass(frozen=True)
class Pki:
    folder: Path

    @property
    def ca(self) -> Path:
        return self.folder / "ca.crt"

    @property
    def serving_cert(self) -> Path:
        return self.folder / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.folder / "apiserver.key"

    @property
    def sa_key(self) -> Path:
        return self.folder / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.folder / "sa.pub"

    @property
    def token_file(self) -> Path:
        return self.folder / "tokens.csv"

    def token(self, identity: str) -> str:
        for line in self.token_file.read_text().splitlines():
            token, user, *_ = line.split(",")
            if user == IDENTITIES[identity][0]:
                return token
        raise KeyError(identity)


def create(folder: Path) -> Pki:
    """Everything once; kept across restarts of the same cluster folder."""
    pki = Pki(folder)
    if pki.token_file.exists():
        _add_missing_identities(pki)
        return pki
    if shutil.which("openssl") is None:
        raise KubedraError("the `openssl` command is needed to make the dev cluster's certificates")
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = ["-newkey", "rsa:2048", "-nodes"]
    _openssl(
        "req",
        "-x509",
        *key,
        "-keyout",
        pki.folder / "ca.key",
        "-out",
        pki.ca,
        "-days",
        "3650",
        "-subj",
        "/CN=kubedra-dev-ca",
    )
    csr = folder / "apiserver.csr"
    _openssl("req", *key, "-keyout", pki.serving_key, "-out", csr, "-subj", "/CN=kube-apiserver")
    extensions = folder / "apiserver.ext"
    extensions.write_text(f"subjectAltName={','.join(SERVING_NAMES)}\n")
    _openssl(
        "x509",
        "-req",
        "-in",
        csr,
        "-CA",
        pki.ca,
        "-CAkey",
        folder / "ca.key",
        "-CAcreateserial",
        "-out",
        pki.serving_cert,
        "-days",
        "3650",
        "-extfile",
        extensions,
    )
    _openssl("genrsa", "-out", pki.sa_key, "2048")
    _openssl("rsa", "-in", pki.sa_key, "-pubout", "-out", pki.sa_pub)
    pki.token_file.write_text("".join(_token_row(name) for name in IDENTITIES))
    pki.token_file.chmod(0o600)
    return pki


def _token_row(name: str) -> str:
    user, groups = IDENTITIES[name]
    return f'{secrets.token_hex(16)},{user},{name},"{groups}"\n'


def _add_missing_identities(pki: Pki) -> None:
    """A folder made by an older kubedra gets the identities added since (read by the API
    server when it starts)."""
    known = {line.split(",")[2] for line in pki.token_file.read_text().splitlines() if line}
    missing = [name for name in IDENTITIES if name not in known]
    if missing:
        with pki.token_file.open("a") as tokens:
            tokens.write("".join(_token_row(name) for name in missing))


def _openssl(*args: str | Path) -> None:
    done = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        raise KubedraError(f"openssl {args[0]} failed: {done.stderr.strip()[-500:]}")


def write_kubeconfig(path: Path, server: str, ca: Path, user: str, token: str) -> None:
    """A one-context kubeconfig: this server, verified with this CA, this bearer token."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "kubedra-dev", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {"name": f"kubedra-dev-{user}", "context": {"cluster": "kubedra-dev", "user": user}}
        ],
        "current-context": f"kubedra-dev-{user}",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
