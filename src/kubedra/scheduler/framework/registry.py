"""Plugins by name, and the profile that says which run and in which order.

Upstream's registry maps a plugin's name to its factory; a profile (KubeSchedulerProfile)
names the plugins it enables. kubedra's in-tree registry and default profile are in
`kubedra.scheduler.plugins`; `build` merges an out-of-tree registry over it (a test's
plugin, or one of an experiment).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kubedra.scheduler.framework.interfaces import Handle, Plugin

PluginFactory = Callable[[Handle], Plugin]
Registry = Mapping[str, PluginFactory]


def build(handle: Handle, profile: Sequence[str], *registries: Registry) -> list[Plugin]:
    """The profile's plugins, made by the last registry that knows each name."""
    merged: dict[str, PluginFactory] = {}
    for registry in registries:
        merged.update(registry)
    unknown = [name for name in profile if name not in merged]
    if unknown:
        known = ", ".join(sorted(merged))
        raise KeyError(f"unknown scheduler plugin(s) {', '.join(unknown)} (known: {known})")
    if len(set(profile)) < len(profile):
        raise ValueError(f"a plugin is named twice in the profile {list(profile)}")
    return [merged[name](handle) for name in profile]
