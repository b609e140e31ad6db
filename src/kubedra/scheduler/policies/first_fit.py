"""`first-fit`: what the kube-scheduler does with DRA.

Upstream scores no devices: the allocator takes the first devices that satisfy the claims
in pool/slice/device order, and the node is any feasible one. kubedra makes the node choice
deterministic (the first feasible node in name order), so results are reproducible and the
devices on that node are exactly those the kube-scheduler's allocator would pick.
"""

from kubedra.scheduler.policies.base import Policy


class FirstFit(Policy):
    name = "first-fit"
    candidates = 1
