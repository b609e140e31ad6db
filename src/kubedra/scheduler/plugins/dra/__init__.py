"""The DRA plugin: claims resolved, devices allocated with the allocator, assumed,
written, and given back (`plugin.py`, `resolve.py`, `release.py`, `diagnosis.py`)."""

from __future__ import annotations

from kubedra.scheduler.plugins.dra.plugin import NAME, ClaimSource, DynamicResources, claims_of

__all__ = ["NAME", "ClaimSource", "DynamicResources", "claims_of"]
