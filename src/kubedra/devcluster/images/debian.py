"""Debian packages without installing them: resolving a closure, downloading the .debs and
unpacking them with `dpkg-deb -x` (no maintainer scripts).

Packages come from bookworm (+ updates, + security) through a private apt configuration
under the cache, never the host's sources; versions are resolved when the lists are first
fetched and kept until a pinned version disappears from the mirror, so the same inputs give
the same digest.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kubedra.devcluster.images.cache import used
from kubedra.devcluster.images.host import ImageBuildError, Log, run, tool

SUITE = "bookworm"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
SOURCES = (
    f"http://deb.debian.org/debian {SUITE} main",
    f"http://deb.debian.org/debian {SUITE}-updates main",
    f"http://deb.debian.org/debian-security {SUITE}-security main",
)
# Packages apt is told are installed so that it does not pull them in: only maintainer
# scripts use them, and none is run. dpkg: readline-common's install-info hook; mawk:
# base-files' pre-dependency on awk (busybox's awk is in the image anyway).
ASSUMED_INSTALLED = (
    "Package: dpkg\nStatus: install ok installed\nVersion: 1.21.23\nArchitecture: amd64\n",
    "Package: mawk\nStatus: install ok installed\nVersion: 1.3.4.20200120-3.1\n"
    "Architecture: amd64\nProvides: awk\n",
)


@dataclass(frozen=True)
class Pin:
    """A Debian package at an exact version."""

    name: str
    version: str
    arch: str

    def filename(self) -> str:
        """The name `apt-get download` gives its .deb (an epoch's colon is %3a)."""
        return f"{self.name}_{self.version.replace(':', '%3a')}_{self.arch}.deb"


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
        missing = [p for p in pins if not used(archives / p.filename())]
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
        apt = tool("apt-get", "apt (Debian's package tools)")
        return run([apt, "-q", *arguments], env=env, cwd=Path(cwd) if cwd else None)

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


def extract(deb: Path, root: Path) -> None:
    """`dpkg-deb -x`: a package's files, without running any of its scripts."""
    run([tool("dpkg-deb", "dpkg (Debian's package tools)"), "-x", str(deb), str(root)])


def write_status(root: Path, pin: Pin, deb: Path) -> None:
    """/var/lib/dpkg/status.d/NAME: the package's control file marked installed, as
    distroless images keep it, so scanners (trivy, grype, syft) list the packages and
    their versions without a dpkg database."""
    control = run(["dpkg-deb", "-f", str(deb)]).rstrip("\n")
    folder = root / "var/lib/dpkg/status.d"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / pin.name).write_text(f"{control}\nStatus: install ok installed\n")


def _write_if_changed(path: Path, text: str) -> None:
    """Write a file only when its text differs (mtimes of unchanged config stay put)."""
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
