"""coordination.k8s.io/v1 Lease: what leader election of replicated components is built on.

A Lease is a small record that one holder renews; replicas that see it unrenewed for its
duration take it over. kubedra's scheduler replicas elect their leader with one, as
kube-scheduler and kube-controller-manager do (`kubedra.cluster.leader`).
"""

from __future__ import annotations

from typing import ClassVar

from kubedra.api.meta import KubeObject, Model


class LeaseSpec(Model):
    """Who holds the lease, for how long, and how often it has changed hands."""

    holder_identity: str | None = None
    """The identity of the current holder (for a scheduler replica: its host name and a
    unique suffix). Empty when nobody holds the lease."""
    lease_duration_seconds: int | None = None
    """How long, in seconds, the lease stays valid after `renewTime`. A candidate may take
    the lease over once that much time has passed without a renewal."""
    acquire_time: str | None = None  # MicroTime: RFC 3339 with microseconds
    """When the current holder acquired the lease (RFC 3339 with microseconds)."""
    renew_time: str | None = None
    """When the holder last renewed the lease (RFC 3339 with microseconds); the lease
    expires `leaseDurationSeconds` after this."""
    lease_transitions: int | None = None
    """How many times the lease has passed from one holder to another."""
    strategy: str | None = None
    """How a new holder is picked under coordinated leader election, for example
    `OldestEmulationVersion`. Empty with classic (first come) election."""
    preferred_holder: str | None = None
    """Under coordinated leader election, the candidate that should hold the lease next;
    the current holder is expected to step down in its favour."""


class Lease(KubeObject):
    """A record that one holder renews to show it is alive; used for leader election
    among replicas (kubedra's scheduler replicas elect their leader with one)."""

    API_GROUP: ClassVar[str] = "coordination.k8s.io"
    KIND: ClassVar[str] = "Lease"
    NAMESPACED: ClassVar[bool] = True

    spec: LeaseSpec = LeaseSpec()
    """The holder, the term and the renewal times of the lease."""
