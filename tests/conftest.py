"""Shared test fixtures: paths of the seed examples and the shared data."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


@pytest.fixture
def seed_dir() -> Path:
    return REPO / "examples" / "seed"


@pytest.fixture
def shared_seed_dir() -> Path:
    path = SHARED / "design" / "seed-examples"
    if not path.is_dir():
        pytest.skip("../shared/design/seed-examples is not present")
    return path
