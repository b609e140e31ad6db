"""The binding cycle's writes on a real store: upstream's order, conflicts, lost answers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kubedra.api.core import Pod
from kubedra.api.resource import (
    AllocationResult,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
    ResourceClaim,
    ResourceClaimConsumerReference,
    ResourceClaimStatus,
)
from kubedra.cluster import SqliteStore
from kubedra.cluster.rest import ClusterError, Unreachable
from kubedra.errors import Conflict
from kubedra.scheduler.binding import FINALIZER, Refused, bind_pod, reserve_claim, same_allocation
from tests.scheduler.cluster import gpu_node, gpu_pod, new_store, user_claim


def allocation(device: str = "gpu-0") -> AllocationResult:
    return AllocationResult(devices=DeviceAllocationResult(results=(
        DeviceRequestAllocationResult(request="gpus", driver="gpu.nvidia.com", pool="n1",
                                      device=device),)))


def consumer(store: SqliteStore, name: str = "p") -> ResourceClaimConsumerReference:
    pod = store.get(Pod, name)
    return ResourceClaimConsumerReference(resource="pods", name=name, uid=pod.metadata.uid or "")


class LostAnswers(SqliteStore):
    """A real store whose next status write or binding gets no answer: done (`commit`), as
    when the API server goes away after committing or fails with 5xx, or not done."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.lose: set[str] = set()
        self.commit = True
        self.error: ClusterError = Unreachable("cannot reach the API server: connection reset")
        self.meanwhile: Callable[[], object] | None = None

    def _lost(self, what: str, write: Any) -> Any:
        if what not in self.lose:
            return write()
        self.lose.discard(what)
        if self.commit:
            write()
        if self.meanwhile is not None:
            self.meanwhile()
        raise self.error

    def update_status(self, obj: Any) -> Any:
        return self._lost("status", lambda: super(LostAnswers, self).update_status(obj))

    def bind(self, pod: Pod, node: str) -> Pod:
        return self._lost("bind", lambda: super(LostAnswers, self).bind(pod, node))  # type: ignore[no-any-return]


@pytest.fixture
def lossy(tmp_path: Path) -> LostAnswers:
    """The same small cluster in a store that can lose answers."""
    store = LostAnswers(tmp_path / "state.db")
    new_store(tmp_path)  # the class, in the same file
    gpu_node(store, "n1", gpus=2)
    user_claim(store, "c")
    gpu_pod(store, "p", claim="c")
    return store


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    store = new_store(tmp_path)
    gpu_node(store, "n1", gpus=2)
    user_claim(store, "c")
    gpu_pod(store, "p", claim="c")
    return store


def test_finalizer_then_allocation_and_reservation(store: SqliteStore) -> None:
    written = reserve_claim(store, store.get(ResourceClaim, "c"), allocation(), consumer(store),
                            allocate=True)
    assert FINALIZER in written.metadata.finalizers
    assert written.status is not None and same_allocation(written.status.allocation, allocation())
    assert [r.name for r in written.status.reserved_for] == ["p"]


def test_a_benign_concurrent_change_is_read_again_and_retried(store: SqliteStore) -> None:
    stale = store.get(ResourceClaim, "c")
    labelled = msgspec.structs.replace(stale.metadata, labels={"team": "a"})
    store.update(msgspec.structs.replace(stale, metadata=labelled))  # someone else, meanwhile
    written = reserve_claim(store, stale, allocation(), consumer(store), allocate=True)
    assert written.metadata.labels == {"team": "a"} and written.status is not None
    assert same_allocation(written.status.allocation, allocation())


def test_a_claim_allocated_elsewhere_meanwhile_is_refused(store: SqliteStore) -> None:
    stale = store.get(ResourceClaim, "c")
    store.update_status(msgspec.structs.replace(
        stale, status=ResourceClaimStatus(allocation=allocation("gpu-1"))))
    with pytest.raises(Refused, match="got allocated elsewhere in the meantime"):
        reserve_claim(store, stale, allocation(), consumer(store), allocate=True)
    assert store.get(ResourceClaim, "c").status.allocation == allocation("gpu-1")  # type: ignore[union-attr]


def test_a_claim_being_deleted_meanwhile_is_refused(store: SqliteStore) -> None:
    claim = store.get(ResourceClaim, "c")
    kept = msgspec.structs.replace(claim.metadata, finalizers=("example.com/keep",))
    stale = store.update(msgspec.structs.replace(claim, metadata=kept))
    store.delete(ResourceClaim, "c")
    with pytest.raises(Refused, match="got deleted in the meantime"):
        reserve_claim(store, stale, allocation(), consumer(store), allocate=True)


def test_reusing_an_allocation_that_changed_meanwhile_is_refused(store: SqliteStore) -> None:
    held = store.update_status(msgspec.structs.replace(
        store.get(ResourceClaim, "c"), status=ResourceClaimStatus(allocation=allocation())))
    store.update_status(msgspec.structs.replace(held, status=None))  # deallocated meanwhile
    with pytest.raises(Refused, match="deallocated or reallocated"):
        reserve_claim(store, held, allocation(), consumer(store), allocate=False)


@pytest.mark.parametrize("error", [
    Unreachable("connection reset"),
    ClusterError("503 ServiceUnavailable"),
])
def test_an_unanswered_status_write_is_read_back_not_repeated(lossy: LostAnswers, error: ClusterError) -> None:
    store = lossy
    if isinstance(error, ClusterError) and not isinstance(error, Unreachable):
        error.status = 503
    store.error, store.lose = error, {"status"}
    written = reserve_claim(store, store.get(ResourceClaim, "c"), allocation(), consumer(store),
                            allocate=True)
    assert written.status is not None and len(written.status.reserved_for) == 1
    assert store.get(ResourceClaim, "c").status == written.status


def test_a_definite_error_is_not_retried(lossy: LostAnswers) -> None:
    store = lossy
    refused = ClusterError("400 BadRequest")
    refused.status = 400
    store.error, store.lose = refused, {"status"}
    with pytest.raises(ClusterError, match="400"):
        reserve_claim(store, store.get(ResourceClaim, "c"), allocation(), consumer(store),
                      allocate=True)


@pytest.mark.parametrize("commit", [True, False])
def test_an_unanswered_binding_is_read_back(lossy: LostAnswers, commit: bool) -> None:
    store = lossy
    store.lose, store.commit = {"bind"}, commit
    bound = bind_pod(store, store.get(Pod, "p"), "n1")  # done, or done on the second try
    assert bound is not None and bound.spec.node_name == "n1"


def test_an_unanswered_binding_of_a_pod_bound_elsewhere_meanwhile_is_refused(lossy: LostAnswers) -> None:
    store = lossy
    gpu_pod(store, "q", claim="c")
    q = store.get(Pod, "q")
    store.lose, store.commit = {"bind"}, False
    store.meanwhile = lambda: SqliteStore(store.path).bind(q, "n1")  # another scheduler
    with pytest.raises(Conflict, match='already assigned to node "n1"'):
        bind_pod(store, q, "n2")
