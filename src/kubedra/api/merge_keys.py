"""Which lists of each kind strategic merge patch merges item by item, and by which key.

These are upstream's `patchStrategy:"merge"` / `patchMergeKey` tags in k8s.io/api
(core/v1, meta/v1 and scheduling/v1beta1; resource.k8s.io/v1 tags only status lists; a
Workload's template list has no tag, so it is atomic and the tags inside its items never
apply). A list not named here is atomic:
apply replaces it whole, as kubectl does. Status lists are left out on purpose: apply never
writes status (it is the `/status` subresource's).
"""

from __future__ import annotations

from collections.abc import Mapping

from kubedra.api.merge import MergeList, Path

_METADATA: dict[Path, MergeList] = {
    ("metadata", "finalizers"): MergeList(),  # a set of strings
    ("metadata", "ownerReferences"): MergeList("uid"),
}


def _containers(group: str) -> dict[Path, MergeList]:
    """A container list and the merge lists inside each container."""
    path = ("spec", group)
    return {
        path: MergeList("name"),
        (*path, "ports"): MergeList("containerPort"),
        (*path, "env"): MergeList("name"),
        (*path, "volumeMounts"): MergeList("mountPath"),
        (*path, "volumeDevices"): MergeList("devicePath"),
    }


_POD: dict[Path, MergeList] = {
    **_containers("containers"),
    **_containers("initContainers"),
    **_containers("ephemeralContainers"),
    ("spec", "volumes"): MergeList("name", retain_keys=True),
    ("spec", "resourceClaims"): MergeList("name", retain_keys=True),
    ("spec", "imagePullSecrets"): MergeList("name"),
    ("spec", "hostAliases"): MergeList("ip"),
    ("spec", "topologySpreadConstraints"): MergeList("topologyKey"),
    ("spec", "schedulingGates"): MergeList("name"),
    ("spec", "evictionResponders"): MergeList("name"),
}

_BY_KIND: dict[str, dict[Path, MergeList]] = {
    "Pod": {**_METADATA, **_POD},
    "Node": {**_METADATA, ("spec", "podCIDRs"): MergeList()},
    "PodGroup": {**_METADATA, ("spec", "resourceClaims"): MergeList("name", retain_keys=True)},
}


def merge_lists(kind: str) -> Mapping[Path, MergeList]:
    """The merge lists of a kind (every kind has metadata's)."""
    return _BY_KIND.get(kind, _METADATA)
