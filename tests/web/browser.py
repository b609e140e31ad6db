"""Debian's Chromium for the browser tests: where it is and how it is started here."""

from __future__ import annotations

import os
from typing import Any

CHROMIUM = os.environ.get("KUBEDRA_CHROMIUM", "/usr/bin/chromium")


def chromium_args() -> list[str]:
    """Headless, sandbox-less (root in CI), no network besides the page. The fresh profile
    (--user-data-dir) is given apart: Playwright takes it as its own argument."""
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if not os.access(CHROMIUM, os.X_OK):
        return f"no Chromium at {CHROMIUM}: run scripts/install-browser (CI does)"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "the playwright package is not installed: make .venv/.installed"
    return None


def launch(playwright: Any, profile_dir: str, **options: Any) -> Any:
    """A persistent Chromium context (the fresh profile) driven by Playwright."""
    return playwright.chromium.launch_persistent_context(
        profile_dir, executable_path=CHROMIUM, args=chromium_args(), headless=True, **options
    )
