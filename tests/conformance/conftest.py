"""The upstream oracle for the conformance tests, built on first use (Go 1.26+)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conformance.oracle import Oracle, build, unavailable


@pytest.fixture(scope="session")
def oracle() -> Iterator[Oracle]:
    why = unavailable()
    if why is not None:
        pytest.skip(why)
    with Oracle(build()) as running:
        yield running
