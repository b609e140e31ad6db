"""The user's order of preference among `firstAvailable` subrequests, as a score.

Upstream's DRA scoring (KEP-4816, the DynamicResources plugin's Score): a node earns, for
every firstAvailable request, more the earlier the subrequest its allocation satisfied
(the list's maximum length, 8, less the subrequest's index), summed over the pod's claims.
kubedra ranks candidates by this score before any policy's: a placement policy chooses
among equally preferred placements and never trades the user's preference for packing.
"""

from __future__ import annotations

from collections.abc import Sequence

from kubedra.api.resource import AllocationResult, ResourceClaim

# resource.k8s.io/v1 FirstAvailableDeviceRequestMaxSize: the most subrequests one request has.
MAX_SUBREQUESTS = 8


def preference(claims: Sequence[ResourceClaim], results: Sequence[AllocationResult]) -> int:
    """Upstream's score of one placement: `results[i]` is the allocation of `claims[i]`."""
    return sum(_claim_score(c, r) for c, r in zip(claims, results, strict=True))


def _claim_score(claim: ResourceClaim, result: AllocationResult) -> int:
    chosen = {r.request for r in result.devices.results if "/" in r.request}
    return sum(
        MAX_SUBREQUESTS - index
        for request in claim.spec.devices.requests
        for index, sub in enumerate(request.first_available)
        if f"{request.name}/{sub.name}" in chosen
    )


def most_preferred(claims: Sequence[ResourceClaim]) -> int:
    """The score of a placement that got the first subrequest of every request still to be
    allocated (an allocated claim keeps its choice): no node can do better, so a search may
    stop at the first placement that reaches it."""
    score = 0
    for claim in claims:
        allocation = claim.status.allocation if claim.status is not None else None
        if allocation is not None:
            score += _claim_score(claim, allocation)
        else:
            alternatives = [r for r in claim.spec.devices.requests if r.first_available]
            score += MAX_SUBREQUESTS * len(alternatives)
    return score
