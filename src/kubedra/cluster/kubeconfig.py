"""Where the API server is and who we are to it: kubeconfig files and in-cluster config.

The rules are client-go's (`clientcmd`), which every Kubernetes tool follows, so a
kubeconfig that works with kubectl works here:
- `--kubeconfig FILE` names one file; otherwise `KUBECONFIG` lists files (`:`-separated)
  that are merged: for each named cluster, user and context the first file that has it
  wins, and `current-context` comes from the first file that sets one.
- `--context` picks a context instead of `current-context`; its namespace is the default.
- Relative file paths inside a kubeconfig are relative to that file's directory.
- Credentials: a bearer token (inline or `tokenFile`), a client certificate and key
  (files or inline base64 data), basic auth, or an `exec` credential plugin
  (`client.authentication.k8s.io` ExecCredential), as cloud providers' kubeconfigs use.
- In a pod, the service account's token and CA under
  `/var/run/secrets/kubernetes.io/serviceaccount` and `KUBERNETES_SERVICE_HOST`/`PORT`.
The token file is read again on every request (bound service-account tokens rotate).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from kubedra.errors import KubedraError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
EXEC_API_VERSIONS = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
)


class ConfigError(KubedraError):
    """A kubeconfig that cannot be used: missing, unreadable, or naming what it lacks."""


@dataclass(frozen=True)
class ExecPlugin:
    """An exec credential plugin: a command that prints an ExecCredential on stdout."""

    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = EXEC_API_VERSIONS[0]
    cwd: str | None = None


@dataclass
class Credentials:
    """How requests authenticate; tokens from files and plugins are fetched when needed."""

    token: str | None = None
    token_file: Path | None = None
    username: str | None = None
    password: str | None = None
    client_cert: bytes | None = None  # PEM
    client_key: bytes | None = None  # PEM
    exec_plugin: ExecPlugin | None = None
    _exec_token: str | None = field(default=None, repr=False)
    _exec_expiry: float = field(default=0.0, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def authorization(self) -> str | None:
        """The `Authorization` header value of the next request, or None."""
        if self.exec_plugin is not None:
            token = self._plugin_token()
            if token:
                return f"Bearer {token}"
        if self.token_file is not None:
            try:
                return f"Bearer {self.token_file.read_text().strip()}"
            except OSError as err:
                message = f"cannot read token file {self.token_file}: {err.strerror}"
                raise ConfigError(message) from None
        if self.token:
            return f"Bearer {self.token}"
        if self.username is not None:
            pair = f"{self.username}:{self.password or ''}".encode()
            return "Basic " + base64.b64encode(pair).decode()
        return None

    def forget_token(self) -> None:
        """Drop a cached plugin token (after a 401), so the next request runs the plugin."""
        with self._lock:
            self._exec_token, self._exec_expiry = None, 0.0

    def _plugin_token(self) -> str | None:
        with self._lock:
            if self._exec_token is None or time.time() >= self._exec_expiry:
                self._run_plugin()
            return self._exec_token

    def _run_plugin(self) -> None:
        plugin = self.exec_plugin
        assert plugin is not None
        request = {"apiVersion": plugin.api_version, "kind": "ExecCredential", "spec": {}}
        env = {**os.environ, **dict(plugin.env), "KUBERNETES_EXEC_INFO": json.dumps(request)}
        try:
            done = subprocess.run(
                [plugin.command, *plugin.args],
                env=env,
                cwd=plugin.cwd,
                capture_output=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as err:
            raise ConfigError(f"exec credential plugin {plugin.command!r} failed: {err}") from None
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
            raise ConfigError(
                f"exec credential plugin {plugin.command!r} exited {done.returncode}"
                + (f": {tail[0]}" if tail else "")
            )
        try:
            status = json.loads(done.stdout)["status"]
        except (ValueError, KeyError, TypeError):
            raise ConfigError(
                f"exec credential plugin {plugin.command!r} printed no ExecCredential status"
            ) from None
        self._exec_token = status.get("token")
        if status.get("clientCertificateData") and status.get("clientKeyData"):
            self.client_cert = status["clientCertificateData"].encode()
            self.client_key = status["clientKeyData"].encode()
        expiry = status.get("expirationTimestamp")
        self._exec_expiry = _parse_time(expiry) - 10 if expiry else float("inf")


@dataclass
class ClusterConfig:
    """Everything needed to talk to one API server as one user."""

    server: str
    credentials: Credentials
    ca_data: bytes | None = None  # PEM
    insecure: bool = False
    tls_server_name: str | None = None
    namespace: str = "default"
    context: str = ""
    source: str = ""  # where it came from, for error messages

    @property
    def user(self) -> str:
        return self.credentials.username or ""


def load_config(
    kubeconfig: str | None = None,
    context: str | None = None,
    in_cluster: bool = False,
    environ: Mapping[str, str] | None = None,
) -> ClusterConfig:
    """The configuration as kubectl would pick it from these options and the environment."""
    env = os.environ if environ is None else environ
    if in_cluster:
        return in_cluster_config(env)
    files = [kubeconfig] if kubeconfig else _env_files(env)
    if not files:
        default = Path.home() / ".kube" / "config"
        if not default.exists():
            raise ConfigError(
                "no kubeconfig: pass --kubeconfig FILE, set KUBECONFIG, or use --in-cluster"
            )
        files = [str(default)]
    return _from_files(files, context)


def _env_files(env: Mapping[str, str]) -> list[str]:
    return [f for f in env.get("KUBECONFIG", "").split(os.pathsep) if f]


def in_cluster_config(env: Mapping[str, str] | None = None) -> ClusterConfig:
    """The service account's view of the cluster, as a pod sees it."""
    env = os.environ if env is None else env
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    token = SERVICE_ACCOUNT_DIR / "token"
    if not host or not port or not token.exists():
        raise ConfigError(
            "not running in a pod: KUBERNETES_SERVICE_HOST/PORT or the service account token "
            f"({token}) is missing"
        )
    ca = SERVICE_ACCOUNT_DIR / "ca.crt"
    namespace_file = SERVICE_ACCOUNT_DIR / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.exists() else "default"
    server_host = f"[{host}]" if ":" in host else host
    return ClusterConfig(
        server=f"https://{server_host}:{port}",
        credentials=Credentials(token_file=token),
        ca_data=ca.read_bytes() if ca.exists() else None,
        namespace=namespace,
        context="in-cluster",
        source="in-cluster service account",
    )


def _from_files(files: Sequence[str], context: str | None) -> ClusterConfig:
    merged: dict[str, dict[str, tuple[dict[str, Any], Path]]] = {
        "clusters": {},
        "users": {},
        "contexts": {},
    }
    current = None
    for file in files:
        doc = _read(Path(file))
        if doc is None:
            continue  # KUBECONFIG may name files that do not exist: client-go skips them
        current = current or doc.get("current-context") or None
        for section, entries in merged.items():
            for entry in doc.get(section) or []:
                if isinstance(entry, dict) and entry.get("name") not in entries:
                    entries[str(entry.get("name"))] = (entry.get(section[:-1]) or {}, Path(file))
    where = ", ".join(files)
    if not any(merged.values()) and current is None:
        raise ConfigError(f"kubeconfig {where}: not found or empty")
    name = context or current
    if not name:
        raise ConfigError(f"kubeconfig {where}: no current-context set; pass --context")
    if name not in merged["contexts"]:
        known = ", ".join(sorted(merged["contexts"])) or "none"
        raise ConfigError(f'kubeconfig {where}: context "{name}" not found (contexts: {known})')
    ctx, _ = merged["contexts"][name]
    cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
    if cluster_name not in merged["clusters"]:
        raise ConfigError(f'kubeconfig {where}: context "{name}" names unknown cluster')
    cluster, cluster_file = merged["clusters"][str(cluster_name)]
    user, user_file = merged["users"].get(str(user_name), ({}, cluster_file))
    server = cluster.get("server")
    if not server:
        raise ConfigError(f'kubeconfig {where}: cluster "{cluster_name}" has no server')
    return ClusterConfig(
        server=str(server).rstrip("/"),
        credentials=_credentials(user, user_file.parent),
        ca_data=_pem(cluster, "certificate-authority", cluster_file.parent),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=cluster.get("tls-server-name"),
        namespace=str(ctx.get("namespace") or "default"),
        context=str(name),
        source=where,
    )


def _read(path: Path) -> dict[str, Any] | None:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"kubeconfig {path}: cannot read: {err}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"kubeconfig {path}: not valid YAML: {err}") from None
    if doc is None:
        return None
    if not isinstance(doc, dict):
        raise ConfigError(f"kubeconfig {path}: not a kubeconfig (expected a mapping)")
    return doc


def _pem(entry: Mapping[str, Any], key: str, base: Path) -> bytes | None:
    """`key-data` (base64, inline) or `key` (a file, relative to the kubeconfig's folder)."""
    data = entry.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(data)
        except ValueError:
            raise ConfigError(f"kubeconfig: {key}-data is not base64") from None
    path = entry.get(key)
    if not path:
        return None
    file = base / Path(path).expanduser()
    try:
        return file.read_bytes()
    except OSError as err:
        raise ConfigError(f"kubeconfig: cannot read {key} {file}: {err.strerror}") from None


def _credentials(user: Mapping[str, Any], base: Path) -> Credentials:
    if user.get("auth-provider"):
        name = (user["auth-provider"] or {}).get("name", "?")
        raise ConfigError(
            f"kubeconfig: auth-provider {name!r} is not supported (removed from kubectl in "
            "1.26); use its exec credential plugin instead"
        )
    token_file = user.get("tokenFile")
    return Credentials(
        token=user.get("token"),
        token_file=(base / token_file) if token_file else None,
        username=user.get("username"),
        password=user.get("password"),
        client_cert=_pem(user, "client-certificate", base),
        client_key=_pem(user, "client-key", base),
        exec_plugin=_exec_plugin(user.get("exec"), base),
    )


def _exec_plugin(spec: Any, base: Path) -> ExecPlugin | None:
    if not spec:
        return None
    command = str(spec.get("command") or "")
    if not command:
        raise ConfigError("kubeconfig: exec plugin without a command")
    api_version = str(spec.get("apiVersion") or EXEC_API_VERSIONS[0])
    if api_version not in EXEC_API_VERSIONS:
        raise ConfigError(f"kubeconfig: exec plugin apiVersion {api_version!r} is not supported")
    if "/" in command and not Path(command).is_absolute():
        command = str(base / command)  # client-go: relative to the kubeconfig's folder
    env = tuple((str(e["name"]), str(e.get("value", ""))) for e in spec.get("env") or [])
    return ExecPlugin(command, tuple(map(str, spec.get("args") or ())), env, api_version)


def _parse_time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
