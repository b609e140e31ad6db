"""coordination.k8s.io/v1 Lease: what leader election of replicated components is built on.

A Lease is a small record that one holder renews; replicas that see it unrenewed for its
duration take it over. kubedra's scheduler replicas elect their leader with one, as
kube-scheduler and kube-controller-manager do (`kubedra.cluster.leader`).
"""

from __future__ import annotations

from typing import ClassVar

from kubedra.api.meta import KubeObject, Model


class LeaseSpec(Model):
    holder_identity: str | None = None
    lease_duration_seconds: int | None = None
    acquire_time: str | None = None  # MicroTime: RFC 3339 with microseconds
    renew_time: str | None = None
    lease_transitions: int | None = None
    strategy: str | None = None
    preferred_holder: str | None = None


class Lease(KubeObject):
    API_GROUP: ClassVar[str] = "coordination.k8s.io"
    KIND: ClassVar[str] = "Lease"
    NAMESPACED: ClassVar[bool] = True

    spec: LeaseSpec = LeaseSpec()
