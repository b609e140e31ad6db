"""ExtendedResources: extended resources that DeviceClasses serve, as DRA claims (KEP-5004).

A pod that asks for `nvidia.com/gpu: 1` and runs where no device plugin advertises it gets
its GPU through DRA when a DeviceClass names the resource in `extendedResourceName`: the
scheduler makes one claim for all such requests of the pod (upstream generates it in the
DynamicResources plugin). The claim joins the pod's claims in the DRA plugin's PreFilter
(this plugin is its ClaimSource) and is created only in PreBind, once a node is chosen, so
a pod that never fits leaves no claim behind; its name goes into the pod's status.
NodeResourcesFit lets such a resource pass on nodes that do not declare it.
"""

from __future__ import annotations

from kubedra.api.core import Pod
from kubedra.api.resource import ResourceClaim
from kubedra.scheduler.binding import update_status_retrying
from kubedra.scheduler.claims import (
    extended_resource_claim,
    extended_resource_classes,
    is_extended_claim_of,
    with_extended_claim,
)
from kubedra.scheduler.framework.state import CycleState
from kubedra.scheduler.plugins.dra import ClaimSource

NAME = "ExtendedResources"


class _Served(dict[str, str]):
    """Extended resource -> the DeviceClass that serves it, as the cycle saw the classes."""


class ExtendedResources(ClaimSource):
    name = NAME

    def extended_claim(self, pod: Pod) -> ResourceClaim | None:
        return self._claim(pod, _Served())

    def _claim(self, pod: Pod, served: _Served) -> ResourceClaim | None:
        """The claim for the pod's extended resources that DRA classes serve: the one
        recorded in its status (or generated for it by an attempt that died before
        recording it), else a new one, not stored."""
        served.update(extended_resource_classes(self.handle.classes().values()))
        if not served:
            return None
        recorded = pod.status.extended_resource_claim_status if pod.status else None
        claims = self.handle.cache.of(ResourceClaim)
        if recorded is not None:
            found = claims.get((pod.namespace, recorded.resource_claim_name))
            if isinstance(found, ResourceClaim):
                return found
        new = extended_resource_claim(pod, served)
        if new is None:
            return None  # asks for none: skip the scan (every pod would pay O(claims))
        for claim in claims.values():
            if isinstance(claim, ResourceClaim) and is_extended_claim_of(claim, pod):
                return claim
        return new

    def extra_claims(self, state: CycleState, pod: Pod) -> list[ResourceClaim]:
        served = _Served()
        state.write(NAME, served)
        claim = self._claim(pod, served)
        return [claim] if claim is not None else []

    def create(self, state: CycleState, pod: Pod, claim: ResourceClaim) -> ResourceClaim:
        """Store the pod's extended-resource claim and record it in the pod's status."""
        served = dict(state.read(NAME, _Served))
        store = self.handle.store
        created = store.create(claim)
        update_status_retrying(
            store, pod, lambda current: with_extended_claim(current, created, served)
        )
        return created
