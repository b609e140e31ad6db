"""Placement policies, discovered by module: each module defines one `Policy` subclass."""

from __future__ import annotations

import importlib
import pkgutil

from kubedra.scheduler.policies.base import POLICIES, Candidate, Policy

for _module in pkgutil.iter_modules(__path__):
    if _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")


def make_policy(name: str) -> Policy:
    """A fresh policy instance by name; KeyError lists the known names."""
    try:
        return POLICIES[name]()
    except KeyError:
        raise KeyError(f"unknown policy {name!r} (known: {', '.join(sorted(POLICIES))})") from None


__all__ = ["POLICIES", "Candidate", "Policy", "make_policy"]
