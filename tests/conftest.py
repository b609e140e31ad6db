"""Shared test fixtures: paths of the seed examples and the shared data."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture(autouse=True)
def own_user_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test its own per-user store and kubedra config (XDG folders; subprocesses
    inherit them): no test reads or writes the real ~/.local/share/kubedra or
    ~/.config/kubedra, and none sees another's default store."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.delenv("KUBEDRA_STORE", raising=False)
    monkeypatch.delenv("KUBEDRA_CONTEXT", raising=False)


@pytest.fixture
def seed_dir() -> Path:
    return REPO / "examples" / "seed"


@pytest.fixture
def shared_seed_dir() -> Path:
    path = SHARED / "design" / "seed-examples"
    if not path.is_dir():
        pytest.skip("../shared/design/seed-examples is not present")
    return path


# --- the real-cluster tier (`make e2e`) ------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--e2e",
        action="store_true",
        help="Also run tests/e2e against a real control plane (built from upstream's Go modules).",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/e2e only with --e2e (`make e2e`), and only where its binaries can exist."""
    try:
        where = collection_path.resolve().relative_to(REPO).parts[:2]
    except ValueError:
        return None
    if where != ("tests", "e2e"):
        return None
    return not config.getoption("--e2e") or e2e_unavailable() is not None


def pytest_report_header(config: pytest.Config) -> str:
    if not config.getoption("--e2e"):
        return "e2e: tests/e2e not collected (they need a real control plane: `make e2e`)"
    why = e2e_unavailable()
    return f"e2e: tests/e2e not collected: {why}" if why else "e2e: real control plane"


def e2e_unavailable() -> str | None:
    """Why the real-cluster tests cannot run here, or None."""
    import shutil

    from kubedra.devcluster.binaries import binaries

    if binaries().complete():
        return None
    if shutil.which("go") is None:
        return f"no Go toolchain and no built binaries in {binaries().folder}"
    return None
