"""What a build takes from the machine it runs on: the kubedra checkout whose files are its
inputs, the host tools it runs (with a fixed umask), and where its progress lines go."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from kubedra.errors import KubedraError


class ImageBuildError(KubedraError):
    """An image could not be built (a tool missing, a download refused, a failed step)."""


class Log:
    """Progress lines with elapsed seconds, to stderr: stdout is the result."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.started = time.monotonic()

    def __call__(self, message: str) -> None:
        """Write one line."""
        self.out.write(f"[{time.monotonic() - self.started:6.1f}s] {message}\n")
        self.out.flush()


def checkout() -> Path:
    """The kubedra checkout (its tools/images and pyproject.toml are inputs)."""
    root = Path(__file__).resolve().parents[4]
    if not (root / "pyproject.toml").exists() or not (root / "tools" / "images").is_dir():
        raise ImageBuildError(f"{root} is not a kubedra checkout: build images from one")
    return root


def project() -> dict[str, Any]:
    """The checkout's pyproject.toml [project] table."""
    with (checkout() / "pyproject.toml").open("rb") as handle:
        table: dict[str, Any] = tomllib.load(handle)["project"]
    return table


def project_version() -> str:
    """The [project] version of the checkout this package runs from."""
    return str(project()["version"])


def tool(name: str, package: str) -> str:
    """The path of a host tool, or an error naming what provides it."""
    found = shutil.which(name)
    if found is None:
        raise ImageBuildError(f"{name} not found: install {package}")
    return found


def run(
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


def pip(*arguments: str, env: dict[str, str] | None = None) -> str:
    """This environment's pip (`python -m pip ARGUMENTS`), run as `run` runs commands."""
    return run([sys.executable, "-m", "pip", *arguments], env=env)
