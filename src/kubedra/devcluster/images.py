"""The images a real node needs, built without a registry or a container engine.

`python -m kubedra.devcluster.images NAME [--out PATH]` writes an OCI archive for
`ctr -n k8s.io images import` and prints the image reference on its last line:

- `pause` (localhost/kubedra-pause:3.10): tools/images/pause.c, `gcc -static -Os`; the
  sandbox image containerd is configured with on the dev node.
- `busybox` (localhost/kubedra-busybox:1.35): Debian's busybox-static with links for the
  common applets; the small test image.
- `kubedra` (localhost/kubedra:<version>): kubedra's own image for the Helm chart. Its root
  is "distroless": the dependency closure of Debian's python3.11-minimal and
  libpython3.11-stdlib, unpacked with `dpkg-deb -x` (no maintainer scripts, no apt, dpkg or
  perl), busybox-static as the shell operators `kubectl exec` into, the wheels pinned in
  tools/images/requirements.lock and kubedra's wheel from this checkout, every .py
  precompiled (unchecked-hash .pyc: the chart's root filesystem is read-only). matplotlib
  is left out, so `kubedra sim` plots are not available in the image.

Debian packages come from bookworm (+ updates, + security) through a private apt
configuration under the cache, never the host's sources; versions are resolved when the
lists are first fetched and kept until a pinned version disappears from the mirror, so
the same inputs give the same digest. Everything slow (lists, .debs, wheels, the unpacked
root, written layers) is cached under `~/.cache/kubedra/images`, keyed by what determines
it, including this module's own code: a warm rebuild only rewrites the archive.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kubedra.devcluster import oci
from kubedra.devcluster.binaries import cache_root
from kubedra.errors import KubedraError

PAUSE_REFERENCE = "localhost/kubedra-pause:3.10"
BUSYBOX_REFERENCE = "localhost/kubedra-busybox:1.35"
BUSYBOX_UPSTREAM = "1.35."  # the tag above is Debian bookworm's busybox, checked on build
SUITE = "bookworm"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
SOURCES = (
    f"http://deb.debian.org/debian {SUITE} main",
    f"http://deb.debian.org/debian {SUITE}-updates main",
    f"http://deb.debian.org/debian-security {SUITE}-security main",
)
# The roots of the kubedra image's package closure: apt adds their dependencies.
KUBEDRA_PACKAGES = (
    "base-files",  # /etc/os-release: how CVE scanners tell which distribution this is
    "busybox-static",  # /bin/sh and the usual tools, one static binary
    "python3.11-minimal",
    "libpython3.11-stdlib",
    "libstdc++6",  # grpcio's and google-re2's extension modules link it
)
# Packages apt is told are installed so that it does not pull them in: only maintainer
# scripts use them, and none is run. dpkg: readline-common's install-info hook; mawk:
# base-files' pre-dependency on awk (busybox's awk is in the image anyway).
ASSUMED_INSTALLED = (
    "Package: dpkg\nStatus: install ok installed\nVersion: 1.21.23\nArchitecture: amd64\n",
    "Package: mawk\nStatus: install ok installed\nVersion: 1.3.4.20200120-3.1\n"
    "Architecture: amd64\nProvides: awk\n",
)
PYTHON = "python3.11"
SITE = "usr/local/lib/python3.11/dist-packages"  # Debian's python puts it on sys.path
APPLETS = (
    "[", "[[", "ash", "awk", "basename", "cat", "chmod", "chown", "cp", "cut", "date", "dd",
    "df", "dirname", "du", "echo", "egrep", "env", "expr", "false", "fgrep", "find", "free",
    "grep", "gunzip", "gzip", "head", "hostname", "id", "ip", "kill", "less", "ln", "ls",
    "mkdir", "mktemp", "more", "mount", "mv", "nc", "netstat", "nslookup", "printf", "ps",
    "pwd", "readlink", "realpath", "rm", "rmdir", "sed", "seq", "sh", "sleep", "sort", "stat",
    "tail", "tar", "tee", "test", "timeout", "top", "touch", "tr", "true", "umount", "uname",
    "uniq", "vi", "watch", "wc", "wget", "which", "whoami", "xargs", "yes", "zcat",
)  # fmt: skip
ENV_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PASSWD = (
    "root:x:0:0:root:/root:/bin/sh\n"
    "nonroot:x:65532:65532:nonroot:/home/nonroot:/bin/false\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
)
GROUP = "root:x:0:\nnonroot:x:65532:\nnogroup:x:65534:\n"
NSSWITCH = "passwd: files\ngroup: files\nhosts: files dns\n"
# Kept from /usr/share: licences (copyright files) and what a program reads at run time.
TRIMMED = (
    "usr/share/man", "usr/share/info", "usr/share/lintian", "usr/share/bug",
    "usr/share/gcc", "usr/share/gdb",  # libstdc++'s pretty-printers for gdb
)  # fmt: skip
PAUSE_CFLAGS = ("-static", "-Os", "-s", "-Wall", "-Wextra", "-Werror")
KEEP_DAYS = 30  # cached things unused for longer are removed after a build
WHEEL_ABIS = ("cp311", "abi3", "none")
MANYLINUX = tuple(f"manylinux_2_{minor}_x86_64" for minor in range(17, 37))  # glibc 2.36


class ImageBuildError(KubedraError):
    """An image could not be built (a tool missing, a download refused, a failed step)."""


@dataclass(frozen=True)
class Built:
    """What `build` made: the archive, its manifest digest and the name containerd gives it."""

    reference: str
    digest: str
    archive: Path


@dataclass(frozen=True)
class Image:
    """What a recipe returns: the layers and config to write under a reference."""

    reference: str
    layers: tuple[oci.Layer, ...]
    config: oci.ImageConfig


@dataclass(frozen=True)
class Cache:
    """Where downloads (apt lists, .debs, wheels) and built things (roots, layers) live.

    Two folders so that a test can build from scratch twice without downloading twice.
    """

    downloads: Path
    built: Path

    @staticmethod
    def default() -> Cache:
        """`~/.cache/kubedra/images` (or under $KUBEDRA_CACHE)."""
        root = cache_root() / "images"
        return Cache(root / "downloads", root / "built")


@dataclass(frozen=True)
class Pin:
    """A Debian package at an exact version."""

    name: str
    version: str
    arch: str

    def filename(self) -> str:
        """The name `apt-get download` gives its .deb (an epoch's colon is %3a)."""
        return f"{self.name}_{self.version.replace(':', '%3a')}_{self.arch}.deb"


class Log:
    """Progress lines with elapsed seconds, to stderr: stdout is the result."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.started = time.monotonic()

    def __call__(self, message: str) -> None:
        """Write one line."""
        self.out.write(f"[{time.monotonic() - self.started:6.1f}s] {message}\n")
        self.out.flush()


def build(
    name: str, out: Path | None = None, cache: Cache | None = None, log: TextIO = sys.stderr
) -> Built:
    """Build image `name` (pause, busybox, kubedra) into an OCI archive at `out`
    (default: the cache's `archives/NAME.tar`). One build at a time per cache."""
    if name not in RECIPES:
        raise ImageBuildError(f"unknown image {name!r}: one of {', '.join(RECIPES)}")
    cache = cache or Cache.default()
    archive = out or cache.built / "archives" / f"{name}.tar"
    say = Log(log)
    with _locked(cache):
        image = RECIPES[name](cache, say)
        digest = oci.write_archive(archive, image.reference, image.layers, image.config)
        _prune(cache)
    say(f"{image.reference} {digest} -> {archive} ({archive.stat().st_size / 2**20:.1f} MiB)")
    return Built(image.reference, digest, archive)


def refresh(cache: Cache | None = None, log: TextIO = sys.stderr) -> None:
    """Fetch Debian's lists again: builds then take the suite's newest packages (security
    fixes), where otherwise they keep the versions first resolved, for the same digest."""
    cache = cache or Cache.default()
    with _locked(cache):
        Apt(cache.downloads / "apt", Log(log)).update()


def node_images(
    names: Sequence[str] = ("pause", "busybox", "kubedra"),
    cache: Cache | None = None,
    log: TextIO = sys.stderr,
) -> tuple[list[Path], str]:
    """The archives a real node imports when it starts, the pause image first, and the
    sandbox image reference for containerd's config. Built (or taken warm from the cache)
    into the cache's archives folder."""
    ordered = ["pause", *(n for n in names if n != "pause")]
    archives = [build(name, cache=cache, log=log).archive for name in ordered]
    return archives, PAUSE_REFERENCE


# --- pause ----------------------------------------------------------------------------------


def pause_image(cache: Cache, log: Log) -> Image:
    """The sandbox image: one static binary, run as upstream's pause runs (65535)."""
    binary = _pause_binary(cache, log)
    key = _key("pause-layer", oci.sha256_file(binary))
    layer = _cached_layer(cache, key, lambda: [oci.file("pause", binary, 0o755)], "pause.c")
    config = oci.ImageConfig(entrypoint=("/pause",), user="65535:65535")
    return Image(PAUSE_REFERENCE, (layer,), config)


def _pause_binary(cache: Cache, log: Log) -> Path:
    """tools/images/pause.c compiled once per source, flags and compiler version."""
    source = checkout() / "tools" / "images" / "pause.c"
    gcc = _tool("gcc", "gcc (and libc6-dev for -static)")
    version = _run([gcc, "--version"]).splitlines()[0]
    key = _key("pause-bin", hashlib.sha256(source.read_bytes()).hexdigest(), PAUSE_CFLAGS, version)
    binary = cache.built / "pause" / key / "pause"
    if binary.exists():
        _used(binary)
        return binary
    log(f"compiling {source.name} ({version})")
    with _scratch(cache) as work:
        shutil.copy(source, work / "pause.c")  # a fixed path: nothing of the host's in it
        _run([gcc, *PAUSE_CFLAGS, "-o", "pause", "pause.c"], cwd=work)
        binary.parent.mkdir(parents=True, exist_ok=True)
        os.replace(work / "pause", binary)
    return binary


# --- busybox --------------------------------------------------------------------------------


def busybox_image(cache: Cache, log: Log) -> Image:
    """The test image: busybox-static, applet links, passwd and a /tmp."""
    ((pin, deb),) = Apt(cache.downloads / "apt", log).fetch(["busybox-static"])
    upstream = pin.version.split(":", 1)[-1]
    if not upstream.startswith(BUSYBOX_UPSTREAM):
        raise ImageBuildError(f"busybox-static {pin.version} is not {BUSYBOX_REFERENCE}'s")
    key = _key("busybox-layer", oci.sha256_file(deb))

    def entries() -> list[oci.Entry]:
        with _scratch(cache) as work:
            _extract(deb, work)
            binary = (work / "bin" / "busybox").read_bytes()
            copyright_ = (work / "usr/share/doc/busybox-static/copyright").read_bytes()
        return [
            oci.file("bin/busybox", binary, 0o755),
            *_applet_links("bin"),
            oci.file("usr/share/doc/busybox-static/copyright", copyright_),
            *_etc_files(),
        ]

    layer = _cached_layer(cache, key, entries, f"busybox-static {pin.version}")
    config = oci.ImageConfig(cmd=("sh",), env=(ENV_PATH,))
    return Image(BUSYBOX_REFERENCE, (layer,), config)


def _applet_links(folder: str) -> list[oci.Entry]:
    """`folder/APPLET -> busybox` for each common applet, and /usr/bin/env for shebangs."""
    links = [oci.symlink(f"{folder}/{applet}", "busybox") for applet in APPLETS]
    return [*links, oci.symlink("usr/bin/env", f"/{folder}/busybox")]


def _etc_files() -> list[oci.Entry]:
    """Users (root, nonroot 65532 as the chart's scheduler runs, nobody), a sticky /tmp."""
    return [
        oci.file("etc/passwd", PASSWD.encode()),
        oci.file("etc/group", GROUP.encode()),
        oci.file("etc/nsswitch.conf", NSSWITCH.encode()),
        oci.directory("tmp", 0o1777),
        oci.directory("root", 0o700),
        oci.directory("home/nonroot", 0o755),
    ]


# --- kubedra --------------------------------------------------------------------------------


def kubedra_image(cache: Cache, log: Log) -> Image:
    """kubedra's image: a Debian base layer, a wheels layer, a kubedra layer."""
    debs = Apt(cache.downloads / "apt", log).fetch(KUBEDRA_PACKAGES)
    base_key = _key("kubedra-base", [(p.name, p.version, oci.sha256_file(d)) for p, d in debs])
    root = _base_root(cache, base_key, debs, log)
    packages = ", ".join(f"{p.name}={p.version}" for p, _ in debs)
    base = _cached_layer(cache, base_key, lambda: oci.tree(root), f"debian {SUITE}: {packages}")
    wheels = _wheels(cache, log)
    deps_key = _key("kubedra-deps", base_key, [oci.sha256_file(w) for w in wheels])
    source_key = _source_digest()
    app_key = _key("kubedra-app", base_key, source_key)
    with _scratch(cache) as work:
        layers_missing = not (
            _layer_meta(cache, deps_key).exists() and _layer_meta(cache, app_key).exists()
        )
        tree_root = _work_root(root, work) if layers_missing else root
        deps = _deps_layer(cache, deps_key, tree_root, wheels, log)
        app = _app_layer(cache, app_key, tree_root, work, log)
    version = project_version()
    config = oci.ImageConfig(
        entrypoint=("/usr/bin/python3", "-m", "kubedra"),
        env=(ENV_PATH, "LANG=C.UTF-8", "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"),
        user="0:0",
        labels={
            "org.opencontainers.image.title": "kubedra",
            "org.opencontainers.image.version": version,
        },
    )
    return Image(kubedra_reference(), (base, deps, app), config)


def kubedra_reference() -> str:
    """`localhost/kubedra:<version of this checkout>`."""
    return f"localhost/kubedra:{project_version()}"


def project_version() -> str:
    """The [project] version of the checkout this module runs from."""
    with (checkout() / "pyproject.toml").open("rb") as handle:
        return str(tomllib.load(handle)["project"]["version"])


def checkout() -> Path:
    """The kubedra checkout (its tools/images and pyproject.toml are inputs)."""
    root = Path(__file__).resolve().parents[3]
    if not (root / "pyproject.toml").exists() or not (root / "tools" / "images").is_dir():
        raise ImageBuildError(f"{root} is not a kubedra checkout: build images from one")
    return root


def _base_root(cache: Cache, key: str, debs: Sequence[tuple[Pin, Path]], log: Log) -> Path:
    """The unpacked Debian root (with stdlib .pyc), made once per set of .debs."""
    root = cache.built / "roots" / key
    done = root.with_name(f"{key}.done")
    if done.exists():
        _used(done)
        return root
    log(f"unpacking {len(debs)} Debian packages")
    shutil.rmtree(root, ignore_errors=True)
    with _scratch(cache) as work:
        stage = work / "root"
        stage.mkdir(mode=0o755)
        for pin, deb in debs:
            _extract(deb, stage)
            _write_status(stage, pin, deb)
        _finish_base(stage)
        log(f"compiling the standard library ({PYTHON} in a chroot)")
        compile_pyc(stage, f"/usr/lib/{PYTHON}")
        root.parent.mkdir(parents=True, exist_ok=True)
        os.replace(stage, root)
    done.touch()
    return root


def _finish_base(root: Path) -> None:
    """What maintainer scripts and python3-minimal would add, less what is only docs."""
    for folder in TRIMMED:
        shutil.rmtree(root / folder, ignore_errors=True)
    docs = [d for d in (root / "usr/share/doc").iterdir() if d.is_dir() and not d.is_symlink()]
    for doc in sorted(item for d in docs for item in d.iterdir()):
        if doc.name == "copyright":
            continue
        if doc.is_dir() and not doc.is_symlink():
            shutil.rmtree(doc)
        else:
            doc.unlink()
    (root / "usr/bin/python3").symlink_to(PYTHON)
    for entry in [*_applet_links("bin"), *_etc_files()]:
        _materialize(root, entry)


def _materialize(root: Path, entry: oci.Entry) -> None:
    """Write an entry onto a host folder (to make a root that a chroot can run)."""
    path = root / entry.path
    path.parent.mkdir(parents=True, exist_ok=True)
    if entry.kind == "symlink":
        path.symlink_to(entry.target)
    elif entry.kind == "dir":
        path.mkdir(exist_ok=True)
        path.chmod(entry.mode)
    elif entry.kind == "file" and entry.data is not None:
        path.write_bytes(entry.data)
        path.chmod(entry.mode)
    else:
        raise ImageBuildError(f"{entry.path}: cannot write a {entry.kind} here")


def _write_status(root: Path, pin: Pin, deb: Path) -> None:
    """/var/lib/dpkg/status.d/NAME: the package's control file marked installed, as
    distroless images keep it, so scanners (trivy, grype, syft) list the packages and
    their versions without a dpkg database."""
    control = _run(["dpkg-deb", "-f", str(deb)]).rstrip("\n")
    folder = root / "var/lib/dpkg/status.d"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / pin.name).write_text(f"{control}\nStatus: install ok installed\n")


def _work_root(base: Path, work: Path) -> Path:
    """A hardlinked copy of the cached base root to run the chroot in; the cache is never
    written (compileall replaces files, it does not write through links)."""
    target = work / "root"
    _run(["cp", "-a", "-l", str(base), str(target)])
    return target


def _deps_layer(cache: Cache, key: str, root: Path, wheels: Sequence[Path], log: Log) -> oci.Layer:
    """The third-party wheels, unpacked into the site folder and precompiled."""

    def entries() -> list[oci.Entry]:
        site = root / SITE
        log(f"unpacking {len(wheels)} wheels")
        for wheel in wheels:
            unpack_wheel(wheel, site, drop_tests=True)
        log("compiling the wheels")
        compile_pyc(root, f"/{SITE}")
        return oci.tree(site, SITE)

    names = ", ".join(w.name.split("-")[0] + "-" + w.name.split("-")[1] for w in wheels)
    return _cached_layer(cache, key, entries, f"wheels: {names}")


def _app_layer(cache: Cache, key: str, root: Path, work: Path, log: Log) -> oci.Layer:
    """kubedra's wheel from this checkout, precompiled, and /usr/local/bin/kubedra."""

    def entries() -> list[oci.Entry]:
        wheel = _kubedra_wheel(work, log)
        site = root / SITE
        tops = unpack_wheel(wheel, site)  # the layer takes these names only, not the deps
        compile_pyc(root, *(f"/{SITE}/{top}" for top in tops if (site / top).is_dir()))
        found = [e for top in tops for e in oci.tree(site / top, f"{SITE}/{top}")]
        script = "#!/usr/bin/python3\nfrom kubedra.cli.main import main\n\nmain()\n"
        return [*found, oci.file("usr/local/bin/kubedra", script.encode(), 0o755)]

    return _cached_layer(cache, key, entries, f"kubedra {project_version()}")


def _kubedra_wheel(work: Path, log: Log) -> Path:
    """A wheel of the checkout, built from a copy (no build/ or egg-info in the tree)."""
    log("building kubedra's wheel")
    source = work / "source"
    for rel in _source_files():
        target = source / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(checkout() / rel, target)
    wheels = work / "wheel"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(wheels),
            str(source),
        ],
        env={"SOURCE_DATE_EPOCH": str(oci.EPOCH)},
    )
    (wheel,) = wheels.glob("kubedra-*.whl")
    return wheel


def _source_files() -> list[str]:
    """What goes into kubedra's wheel: pyproject.toml, README.md and src/ less caches."""
    root = checkout()
    found = ["pyproject.toml", "README.md"]
    for folder, dirs, files in os.walk(root / "src"):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.endswith(".egg-info"))
        found += [
            str(Path(folder, f).relative_to(root)) for f in sorted(files) if not f.endswith(".pyc")
        ]
    return found


def _source_digest() -> str:
    """The digest of kubedra's wheel inputs: the app layer's cache key."""
    digest = hashlib.sha256()
    for rel in _source_files():
        digest.update(f"{rel}\0".encode())
        digest.update(hashlib.sha256((checkout() / rel).read_bytes()).digest())
    return digest.hexdigest()


def unpack_wheel(wheel: Path, site: Path, drop_tests: bool = False) -> list[str]:
    """Install a wheel by unzipping it (what pip does, minus scripts, headers, data and the
    host's paths in RECORD); returns its top-level names. Files are 0644, or 0755 when the
    wheel marks them executable. `drop_tests` leaves out `tests` packages (numpy's are
    15 MiB that nothing imports at run time)."""
    tops: set[str] = set()
    with zipfile.ZipFile(wheel) as archive:
        for info in sorted(archive.infolist(), key=lambda i: i.filename):
            rel = _wheel_target(info.filename)
            if rel is None or (drop_tests and "tests" in rel.split("/")[1:-1]):
                continue
            target = site / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.read(info))
            target.chmod(0o755 if (info.external_attr >> 16) & 0o111 else 0o644)
            tops.add(rel.split("/", 1)[0])
    return sorted(tops)


def _wheel_target(name: str) -> str | None:
    """Where a wheel member goes under site-packages (None: not installed)."""
    parts = name.split("/")
    if name.endswith("/") or ".." in parts or name.startswith("/"):
        return None
    if parts[0].endswith(".data"):
        return "/".join(parts[2:]) if parts[1] in ("purelib", "platlib") else None
    return name


def compile_pyc(root: Path, *folders: str) -> None:
    """Precompile with the image's own Python, in a chroot: unchecked-hash .pyc (no source
    stat at import, no mtime in them) and a fixed hash seed (set constants keep their
    order), so the bytes depend on the sources alone."""
    command = [
        _tool("chroot", "coreutils"),
        str(root),
        f"/usr/bin/{PYTHON}",
        "-m",
        "compileall",
        "-q",
        "--invalidation-mode",
        "unchecked-hash",
        *folders,
    ]
    if os.geteuid() != 0:
        command = [_tool("unshare", "util-linux"), "--user", "--map-root-user", *command]
    env = {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "SOURCE_DATE_EPOCH": str(oci.EPOCH),
    }
    _run(command, env=env, clean_env=True)


# --- wheels ---------------------------------------------------------------------------------


def lock_path() -> Path:
    """tools/images/requirements.lock: the image's wheels, pinned with their hashes."""
    return checkout() / "tools" / "images" / "requirements.lock"


def _wheels(cache: Cache, log: Log) -> list[Path]:
    """The locked wheels from the cache, downloaded from PyPI when any is missing."""
    folder = cache.downloads / "wheels"
    wanted = _locked_hashes()
    found = _wheels_by_hash(folder)
    if not all(any(h in found for h in hashes) for hashes in wanted.values()):
        log(f"downloading {len(wanted)} wheels (cp311 manylinux x86_64)")
        _pip_download(["--require-hashes", "--no-deps", "-r", str(lock_path())], folder)
        found = _wheels_by_hash(folder)
    chosen = []
    for name, hashes in sorted(wanted.items()):
        match = [found[h] for h in hashes if h in found]
        if not match:
            raise ImageBuildError(f"{name}: no downloaded wheel matches {lock_path()}")
        chosen.append(match[0])
        _used(match[0])
    return chosen


def _locked_hashes() -> dict[str, list[str]]:
    """`name==version` -> its allowed sha256 hex digests, from the lock file."""
    text = lock_path().read_text().replace("\\\n", " ")
    locked = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement, *options = line.split()
            locked[requirement] = [o.split(":", 1)[1] for o in options if "sha256:" in o]
    return locked


def _wheels_by_hash(folder: Path) -> dict[str, Path]:
    """Every .whl in the folder by its sha256 hex digest."""
    return {oci.sha256_file(w).split(":", 1)[1]: w for w in sorted(folder.glob("*.whl"))}


def _pip_download(arguments: Sequence[str], folder: Path) -> None:
    """`pip download` of cp311 manylinux x86_64 wheels (never sdists: nothing is built)."""
    platforms = [f"--platform={p}" for p in (*MANYLINUX, "manylinux2014_x86_64")]
    abis = [f"--abi={abi}" for abi in WHEEL_ABIS]
    folder.mkdir(parents=True, exist_ok=True)
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--disable-pip-version-check",
            "--only-binary=:all:",
            "--python-version=3.11",
            "--implementation=cp",
            *abis,
            *platforms,
            "--dest",
            str(folder),
            *arguments,
        ]
    )


def write_lock(log: TextIO = sys.stderr) -> Path:
    """Rewrite the lock: pyproject's runtime dependencies less matplotlib, at the versions
    installed in this environment (what the tests ran), with their dependencies."""
    with (checkout() / "pyproject.toml").open("rb") as handle:
        wanted = tomllib.load(handle)["project"]["dependencies"]
    pins = []
    for requirement in wanted:
        name = re.split(r"[ ;<>=!~\[]", requirement, maxsplit=1)[0]
        if name.lower() == "matplotlib":
            continue
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            pins.append(requirement)
    with tempfile.TemporaryDirectory() as scratch:
        _pip_download(pins, Path(scratch))
        lines = [_lock_line(w) for w in sorted(Path(scratch).glob("*.whl"))]
    header = (
        "# The kubedra image's wheels (cp311, manylinux x86_64), written by\n"
        "# `python -m kubedra.devcluster.images --write-lock`. matplotlib is left out.\n"
    )
    lock_path().write_text(header + "".join(lines))
    log.write(f"wrote {lock_path()} ({len(lines)} wheels)\n")
    return lock_path()


def _lock_line(wheel: Path) -> str:
    """`name==version --hash=sha256:...` for a downloaded wheel."""
    name, version = wheel.name.split("-")[:2]
    digest = oci.sha256_file(wheel).split(":", 1)[1]
    return f"{name.replace('_', '-').lower()}=={version} --hash=sha256:{digest}\n"


# --- Debian packages ------------------------------------------------------------------------


class Apt:
    """apt-get on a private configuration: bookworm's lists, an empty dpkg status (plus the
    assumed packages) and an archive folder under the cache. The host's sources, status and
    configuration are never read, and nothing is installed on the host."""

    def __init__(self, root: Path, log: Log) -> None:
        self.root = root
        self.log = log

    def fetch(self, packages: Sequence[str]) -> list[tuple[Pin, Path]]:
        """The closure of `packages` as (pin, .deb) sorted by name, downloading what is
        missing. Lists are fetched once; again only when a pinned .deb is gone upstream."""
        self._configure()
        if not any((self.root / "lists").glob("*_Packages*")):
            self.update()
        try:
            return self._download(self.resolve(packages))
        except ImageBuildError as error:
            self.log(f"apt: {str(error).strip().splitlines()[-1]}; refreshing the lists")
            self.update()
            return self._download(self.resolve(packages))

    def update(self) -> None:
        """Fetch the suite's package lists (signed: checked against Debian's keyring)."""
        self._configure()
        self.log(f"apt-get update ({SUITE}, private lists)")
        self._apt("update")

    def resolve(self, packages: Sequence[str]) -> list[Pin]:
        """What `apt-get install --no-install-recommends` would install on an empty system."""
        plan = self._apt("install", "--simulate", "--no-install-recommends", *packages)
        pins = []
        for line in plan.splitlines():
            found = re.match(r"Inst (\S+) \((\S+) .*\[(\S+)\]\)", line)
            if found:
                pins.append(Pin(*found.groups()))
        if not pins:
            raise ImageBuildError(f"apt resolved nothing for {packages}:\n{plan}")
        return sorted(pins, key=lambda p: p.name)

    def _download(self, pins: Sequence[Pin]) -> list[tuple[Pin, Path]]:
        """Download the pinned .debs not yet in the archive folder (verified by apt)."""
        archives = self.root / "archives"
        missing = [p for p in pins if not _used(archives / p.filename())]
        if missing:
            self.log(f"downloading {len(missing)} .debs")
            with tempfile.TemporaryDirectory(dir=archives) as partial:
                self._apt("download", *(f"{p.name}={p.version}" for p in missing), cwd=partial)
                for pin in missing:
                    os.replace(Path(partial, pin.filename()), archives / pin.filename())
        return [(p, archives / p.filename()) for p in pins]

    def _apt(self, *arguments: str, cwd: str | None = None) -> str:
        """apt-get with the private configuration."""
        env = {"APT_CONFIG": str(self.root / "apt.conf"), "DEBIAN_FRONTEND": "noninteractive"}
        apt = _tool("apt-get", "apt (Debian's package tools)")
        return _run([apt, "-q", *arguments], env=env, cwd=Path(cwd) if cwd else None)

    def _configure(self) -> None:
        """Write the private configuration (the same text every time)."""
        if not Path(KEYRING).exists():
            raise ImageBuildError(f"{KEYRING} is missing: install debian-archive-keyring")
        for folder in ("lists/partial", "archives", "cache", "state", "empty"):
            (self.root / folder).mkdir(parents=True, exist_ok=True)
        sources = "".join(f"deb [signed-by={KEYRING}] {s}\n" for s in SOURCES)
        _write_if_changed(self.root / "sources.list", sources)
        _write_if_changed(self.root / "status", "\n".join(ASSUMED_INSTALLED))
        _write_if_changed(self.root / "apt.conf", self._config_text())

    def _config_text(self) -> str:
        """apt.conf: every Dir under the cache; read before apt.conf.d, so none of the
        host's parts applies."""
        r = self.root
        settings = {
            "Dir::Etc::Main": "/dev/null",
            "Dir::Etc::Parts": r / "empty",
            "Dir::Etc::SourceList": r / "sources.list",
            "Dir::Etc::SourceParts": r / "empty",
            "Dir::Etc::Preferences": "/dev/null",
            "Dir::Etc::PreferencesParts": r / "empty",
            "Dir::State": r / "state",
            "Dir::State::Lists": r / "lists",
            "Dir::State::status": r / "status",
            "Dir::Cache": r / "cache",
            "Dir::Cache::archives": r / "archives",
            "APT::Architecture": "amd64",
            "APT::Sandbox::User": "root",
            "Acquire::Languages": "none",
            "Acquire::Retries": "3",
            "Debug::NoLocking": "true",
        }
        lines = [f'{key} "{value}";' for key, value in settings.items()]
        return "\n".join([*lines, 'APT::Architectures { "amd64"; };', ""])


def _extract(deb: Path, root: Path) -> None:
    """`dpkg-deb -x`: a package's files, without running any of its scripts."""
    _run([_tool("dpkg-deb", "dpkg (Debian's package tools)"), "-x", str(deb), str(root)])


# --- shared ---------------------------------------------------------------------------------


def _cached_layer(
    cache: Cache, key: str, entries: Callable[[], Iterable[oci.Entry]], created_by: str
) -> oci.Layer:
    """A layer written once per key: the blob and its digests are kept under the cache."""
    meta = _layer_meta(cache, key)
    if meta.exists():
        layer = oci.Layer.from_json(json.loads(meta.read_text()))
        if layer.blob.path.exists():
            _used(meta)
            return layer
    layer = oci.write_layer(entries(), meta.with_suffix(".tar.gz"), created_by)
    meta.write_text(json.dumps(layer.to_json(), indent=1, sort_keys=True))
    return layer


def _used(path: Path) -> bool:
    """Mark a cached file as used now (pruning goes by that); False if it is not there."""
    try:
        os.utime(path)
    except FileNotFoundError:
        return False
    return True


def _prune(cache: Cache) -> None:
    """Forget what no build used for KEEP_DAYS (every source edit makes a kubedra layer,
    every Debian update a root), and work folders a killed build left behind."""
    cutoff = time.time() - KEEP_DAYS * 86400
    for meta in cache.built.glob("layers/*.json"):
        if meta.stat().st_mtime < cutoff:
            meta.with_suffix(".tar.gz").unlink(missing_ok=True)
            meta.unlink()
    for done in cache.built.glob("roots/*.done"):
        if done.stat().st_mtime < cutoff:
            shutil.rmtree(done.with_suffix(""), ignore_errors=True)
            done.unlink()
    for binary in cache.built.glob("pause/*/pause"):
        if binary.stat().st_mtime < cutoff:
            shutil.rmtree(binary.parent, ignore_errors=True)
    downloads = [*cache.downloads.glob("apt/archives/*.deb"), *cache.downloads.glob("wheels/*")]
    for download in downloads:
        if download.stat().st_mtime < cutoff:
            download.unlink()
    for work in cache.built.glob("tmp/*"):
        if work.stat().st_mtime < time.time() - 86400:
            shutil.rmtree(work, ignore_errors=True)


def _layer_meta(cache: Cache, key: str) -> Path:
    """Where a cached layer's digests are kept."""
    return cache.built / "layers" / f"{key}.json"


def _key(*parts: object) -> str:
    """A cache key over the parts and this recipe's own code (a changed recipe rebuilds)."""
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode())
    for module in (__file__, oci.__file__):
        digest.update(Path(module).read_bytes())
    return digest.hexdigest()[:32]


@contextlib.contextmanager
def _scratch(cache: Cache) -> Iterator[Path]:
    """A work folder on the cache's file system (hardlinks and renames stay in one)."""
    parent = cache.built / "tmp"
    parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=parent))
    try:
        yield work
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def _locked(cache: Cache) -> Iterator[None]:
    """One build at a time per cache (apt's lists and the layer store are shared)."""
    cache.built.mkdir(parents=True, exist_ok=True)
    with (cache.built / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _tool(name: str, package: str) -> str:
    """The path of a host tool, or an error naming what provides it."""
    found = shutil.which(name)
    if found is None:
        raise ImageBuildError(f"{name} not found: install {package}")
    return found


def _run(
    command: Sequence[str],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    clean_env: bool = False,
) -> str:
    """Run a command with umask 022 (file modes never depend on the caller's); its stdout,
    or an error with its output."""
    full_env = dict(env or {}) if clean_env else {**os.environ, **(env or {})}
    done = subprocess.run(
        list(command), cwd=cwd, env=full_env, capture_output=True, text=True, umask=0o022
    )
    if done.returncode != 0:
        raise ImageBuildError(
            f"{' '.join(command[:4])}... failed ({done.returncode}):\n"
            f"{done.stdout[-2000:]}{done.stderr[-4000:]}"
        )
    return done.stdout


def _write_if_changed(path: Path, text: str) -> None:
    """Write a file only when its text differs (mtimes of unchanged config stay put)."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)


RECIPES: dict[str, Callable[[Cache, Log], Image]] = {
    "pause": pause_image,
    "busybox": busybox_image,
    "kubedra": kubedra_image,
}


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m kubedra.devcluster.images NAME [--out PATH]`; the reference is printed last."""
    parser = argparse.ArgumentParser(
        prog="python -m kubedra.devcluster.images",
        description=__doc__.split("\n\n")[0] if __doc__ else "",
    )
    parser.add_argument("name", nargs="?", choices=sorted(RECIPES), help="the image to build")
    parser.add_argument("--out", type=Path, help="the archive to write (default: the cache)")
    parser.add_argument(
        "--refresh",
        action="store_true",
        help="fetch Debian's package lists again first (newer packages give a new digest)",
    )
    parser.add_argument(
        "--write-lock",
        action="store_true",
        help="rewrite tools/images/requirements.lock from this environment",
    )
    args = parser.parse_args(argv)
    try:
        if args.write_lock:
            write_lock()
            return 0
        if args.name is None:
            parser.error("name an image")
        if args.refresh:
            refresh()
        built = build(args.name, args.out)
    except KubedraError as error:
        sys.stderr.write(f"error: {error}\n")
        return 1
    print(f"archive: {built.archive}")
    print(f"digest: {built.digest}")
    print(built.reference)
    return 0


if __name__ == "__main__":
    sys.exit(main())
