"""Objects rewritten into the form upstream's API server accepts (`kubedra convert`).

kubedra's lenient CEL mode resolves a bare `device.capacity["memory"]` to the device's own
driver domain; upstream keys the map by domain first and rejects the selector. The linter
already names the portable form; this module applies it to whole objects, so a manifest
written for kubedra can be handed to `kubectl apply` on a real cluster unchanged otherwise.
(The v1beta1-style request shape needs no step here: decoding already moved it under
`exactly`, and every dump is the resource.k8s.io/v1 shape.)
"""

from __future__ import annotations

from dataclasses import dataclass

from kubedra.api.codec import decode_object, format_path, to_dict
from kubedra.api.meta import KubeObject
from kubedra.api.validation.report import show
from kubedra.cel.lint import bare_lookups, portable_rewrite
from kubedra.cel.validation import KnownDomains, candidate_domains, selectors_of
from kubedra.errors import KubedraError


@dataclass(frozen=True, slots=True)
class Rewrite:
    """One selector that changed, for the user to review."""

    path: str
    before: str
    after: str
    note: str = ""


def portable_object(
    obj: KubeObject, known: KnownDomains, domain: str | None = None
) -> tuple[KubeObject, list[Rewrite]]:
    """`obj` with every bare lookup qualified by a driver domain: `domain` when given, else
    the one driver that publishes the name (from `known`, then well-known drivers)."""
    data = to_dict(obj)
    rewrites: list[Rewrite] = []
    for path, selector in selectors_of(obj):
        if selector.cel is None or not selector.cel.expression:
            continue
        expression = selector.cel.expression
        hits = bare_lookups(expression)
        if not hits:
            continue
        chosen, note = _domain_for(obj, path, hits[0].map, hits[0].key, known, domain)
        after = portable_rewrite(expression, chosen)
        _selector_at(data, path)["cel"]["expression"] = after
        rewrites.append(Rewrite(format_path((*path, "cel", "expression")), expression, after, note))
    if not rewrites:
        return obj, []
    return decode_object(data).obj, rewrites


def _domain_for(
    obj: KubeObject,
    path: tuple[str | int, ...],
    map_name: str,
    key: str,
    known: KnownDomains,
    domain: str | None,
) -> tuple[str, str]:
    if domain:
        return domain, ""
    domains = candidate_domains(map_name, key, known)
    if not domains:
        raise KubedraError(
            f"{obj.KIND} {obj.name}: {format_path(path)}: no driver is known to publish "
            f"{map_name} {show(key)}: give --domain (e.g. --domain gpu.nvidia.com)"
        )
    note = (
        f"{', '.join(domains[1:])} also publish {map_name} {show(key)}; --domain chooses"
        if len(domains) > 1
        else ""
    )
    return domains[0], note


def _selector_at(data: dict[str, object], path: tuple[str | int, ...]) -> dict[str, dict[str, str]]:
    node: object = data
    for segment in path:
        node = node[segment]  # type: ignore[index]
    assert isinstance(node, dict)
    return node
