"""Where a gang with a topology constraint goes: one domain (one value of a node label)
for all its pods, chosen once for the whole gang.

Upstream's topology-aware workload scheduling (KEP-4671's follow-up) places a pod group
inside one domain of `schedulingConstraints.topology[0].key`. kubedra chooses the domain
before the gang's first pod is tried, by packing what the gang still needs into each
domain, node by node. A pending member counts on a node only when all of this fits there
at once, next to the members packed onto that node before it:

* its pod requests (CPU, memory, extended resources): the effective requests
  NodeResourcesFit checks (`pod_requests`: the containers' sum, or the largest init
  container's), against the node's allocatable less what the pods bound or assumed there
  request (`node_usage`) and less the members packed there already;
* its devices, per request: the devices passing the request's DeviceClass AND its own
  selectors (`firstAvailable`: its first alternative), `count` of them; for
  `allocationMode: All`, every such device of the node, which must all be free (a node
  with none, or with one in use or taken by another member, does not take it);
* its node selector, required node affinity and tolerations;

and a claim several members share (the PodGroup's own claim, KEP-5729, or one claim named
by several pods) counts once, on one node of the domain.

A domain fits when its nodes take the members the gang still needs (all of them, else at
least minCount); of those, the one with the fewest free matching devices (best fit, ties:
the smaller value), so that a large or whole domain stays for a large gang. A domain with
546 free GPUs spread over many half-used nodes does not take 64 pods of 8 GPUs when only
60 of its nodes are whole, and a rack whose GPUs are free but whose CPU is taken does not
take pods that ask for that CPU. A request's constraints (`matchAttribute`, ...), device
taints and network-attached devices are still the allocator's: when the chosen domain
fails at placement after all, the plugin remembers it as failed for that gang (until a
device in it is freed) and the next choice takes the next best domain.

When no domain fits, the refusal says what is short: the devices (`needs 16 device(s) of
class gpu in one ...; the largest rack has 12 free (rack-b)`), or, where some domain has
the devices for the gang but its nodes lack the CPU or memory, that resource (`needs 4
pod(s) of 16 CPU in one ...; the largest rack takes 2 (rack-a)`).

What a gang needs is counted in `need.py`, and a domain's nodes are packed in
`packing.py`; this module chooses among the domains and words a refusal.

The same functions answer `kubedra explain podgroup` (`choose`, `cluster_fit`,
`blamed_class`, `held_domain`, `refusal`), so that its line and the PodGroup's condition
say the same thing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kubedra.api.core import Node, Pod
from kubedra.api.quantity import Quantity
from kubedra.scheduler.framework.interfaces import Handle
from kubedra.scheduler.nodes import pod_requests
from kubedra.scheduler.plugins.gang.need import Need, gang_need
from kubedra.scheduler.plugins.gang.packing import DomainFit, Packer


@dataclass
class Choice:
    """The domain for a gang, or why there is none (`reason`), with every domain's fit."""

    domain: str | None
    reason: str
    need: Need
    fits: dict[str, DomainFit]
    required: int
    skipped: tuple[str, ...] = ()  # domains that fit but failed at placement for the gang


def domains(handle: Handle, key: str) -> dict[str, list[Node]]:
    """The owned nodes per value of label `key` (nodes without it are in none)."""
    out: dict[str, list[Node]] = {}
    for node in sorted(handle.nodes(), key=lambda n: n.name):
        value = node.metadata.labels.get(key)
        if value is not None:
            out.setdefault(value, []).append(node)
    return out


def choose(
    handle: Handle,
    pods: Sequence[Pod],
    key: str,
    required: int | None = None,
    failed: Mapping[str, int] | None = None,
) -> Choice:
    """The domain of label `key` for the gang's pending `pods`: of those whose nodes take
    at least `required` of them (default: all) and the shared claims, the best fit; one
    in `failed` (domain -> its free devices when it failed) only once more is free there."""
    need = gang_need(handle, pods)
    want = len(pods) if required is None else min(required, len(pods))
    groups = domains(handle, key)
    if not groups:
        reason = f"no node has the label {key} of the pod group's topology constraint"
        return Choice(None, reason, need, {}, want)
    packer = Packer(handle, need)
    fits = {value: packer.fit(value, nodes) for value, nodes in groups.items()}
    ok = [f for f in fits.values() if f.shared and f.members >= want]
    failed = failed or {}
    skipped = tuple(sorted(f.value for f in ok if f.value in failed and f.spare <= failed[f.value]))
    ok = [f for f in ok if f.value not in skipped]
    if ok:
        best = min(ok, key=lambda f: (f.members < len(pods), f.spare, f.value))
        return Choice(best.value, "", need, fits, want, skipped)
    if any(f.short for f in fits.values()):
        # Some member was refused for CPU or memory: would the devices alone fit? (Only
        # here, on the way to a refusal, so that a gang that fits packs once.)
        for value, nodes in groups.items():
            fits[value].device_members = packer.fit(value, nodes, resources=False).members
    choice = Choice(None, "", need, fits, want, skipped)
    choice.reason = refusal(key, choice)
    return choice


def cluster_fit(handle: Handle, pods: Sequence[Pod]) -> tuple[Need, DomainFit]:
    """What the gang's pending `pods` need and how much of it the whole cluster (the
    nodes this scheduler owns) takes: the count without a topology key."""
    need = gang_need(handle, pods)
    nodes = sorted(handle.nodes(), key=lambda n: n.name)
    return need, Packer(handle, need).fit("", nodes)


def blamed_class(need: Mapping[str, int], free: Iterable[Mapping[str, int]]) -> str:
    """The class a refusal names: the one the best domain lacks most of (ties: the first
    by name; none lacking: the class needed most)."""
    frees = list(free) or [Counter()]
    return max(sorted(need), key=lambda c: (need[c] - max(f.get(c, 0) for f in frees), need[c]))


def held_domain(handle: Handle, members: Iterable[Pod], key: str) -> str | None:
    """The domain the gang's bound or reserved members are in, if any."""
    node_map = handle.node_map()
    for m in members:
        node = node_map.get(m.spec.node_name or "")
        if node is not None and (value := node.metadata.labels.get(key)) is not None:
            return value
    return None


def refusal(key: str, choice: Choice) -> str:
    """Why no domain takes the gang, in one line with the numbers: `needs 16 device(s) of
    class gpu (memory > 40Gi) in one topology.kubernetes.io/rack; the largest rack has 12
    free (rack-b)`, then, where devices are not what is short, how many pods fit there;
    where a domain has the devices for the gang but not the CPU or memory on its nodes,
    that resource instead: `needs 4 pod(s) of 16 CPU in one ...; the largest rack takes 2
    (rack-a)`."""
    short = key.rpartition("/")[2] or key
    fits = choice.fits
    need = choice.need.by_class
    head = f"needs {choice.need.describe() or 'no devices'} in one {key}"
    resources = _resource_refusal(key, choice)
    if resources:
        line = resources
    elif not need:
        best = max(fits.values(), key=lambda f: (f.members, f.value))
        return (
            f"{head}; the best {short} ({best.value}) has room for {best.members} of "
            f"{len(choice.need.pods)} pod(s)"
        )
    else:
        klass = blamed_class(need, (f.free for f in fits.values()))
        largest = max(fits.values(), key=lambda f: (f.free[klass], f.members, f.value))
        line = f"{head}; the largest {short} has {largest.free[klass]} free ({largest.value})"
        if largest.free[klass] >= need[klass]:
            if not largest.shared:
                line += " but not the shared claim's devices on one node"
            elif largest.members < choice.required:
                line += f" but room for {largest.members} of {len(choice.need.pods)} pod(s)"
    if choice.skipped:
        line += f"; failed at placement: {', '.join(choice.skipped)}"
    return line


def _resource_refusal(key: str, choice: Choice) -> str:
    """The refusal for a gang some domain has the devices for (all its shared claims, and
    its members counting devices only) but whose nodes lack the CPU, memory or extended
    resources the members request; "" when devices are short everywhere."""
    open_ = [f for f in choice.fits.values() if f.value not in choice.skipped]
    fitting = [
        f
        for f in open_
        if f.shared and f.device_members is not None and f.device_members >= choice.required
    ]
    reasons: Counter[str] = Counter()
    for f in fitting:
        reasons.update(f.short)
    if not reasons:
        return ""
    # "Insufficient cpu" -> cpu: the resource refused most often where the devices fit
    name = max(sorted(reasons), key=lambda r: reasons[r]).rpartition(" ")[2]
    asked = [q for pod, _ in choice.need.pods if (q := pod_requests(pod).get(name)) is not None]
    most = max(asked, default=Quantity.from_int(0))
    each = ("" if all(q == most for q in asked) else "up to ") + _amount(name, most)
    largest = max(open_, key=lambda f: (f.members, f.value))
    short = key.rpartition("/")[2] or key
    return (
        f"needs {choice.required} pod(s) of {each} in one {key}; the largest {short} "
        f"takes {largest.members} ({largest.value})"
    )


def _amount(name: str, q: Quantity) -> str:
    """`16 CPU`, `64Gi memory`, `2 example.com/foo`."""
    return f"{q} CPU" if name == "cpu" else f"{q} {name}"
