"""The event recorder's client follows the component's client limits (`--kube-api-qps`,
`--kube-api-burst`), in a rate limiter of its own, as kube-scheduler's event client (made
from the same clientConnection config: cmd/kube-scheduler/app/options createClients)."""

from __future__ import annotations

from kubedra.cluster.events import ApiRecorder, recorder_for
from kubedra.cluster.kubeconfig import ClusterConfig, Credentials
from kubedra.cluster.kubernetes import KubeStore
from kubedra.cluster.rest import ApiClient
from kubedra.scheduler.runner import RunConfig, SchedulerRunner


def cluster(qps: float, burst: int) -> KubeStore:
    # nothing listens there: no request is made
    config = ClusterConfig(server="https://127.0.0.1:1", credentials=Credentials(token="t"))
    return KubeStore(ApiClient(config, qps=qps, burst=burst))


def test_the_recorder_takes_the_stores_limits_in_a_limiter_of_its_own() -> None:
    store = cluster(7.0, 3)
    recorder = recorder_for(store, "kubedra", "me")
    try:
        assert isinstance(recorder, ApiRecorder)
        limiter = recorder.client.limiter
        assert (limiter.qps, limiter.burst) == (7.0, 3)
        assert limiter is not store.client.limiter  # events never take the store's tokens
    finally:
        recorder.close()


def test_an_unthrottled_client_writes_unthrottled_events_and_limits_can_be_given() -> None:
    unthrottled = ApiRecorder(cluster(-1.0, 5000), "kubedra", "me")
    given = ApiRecorder(cluster(-1.0, 5000), "kubedra", "me", qps=20.0, burst=40)
    try:
        assert unthrottled.client.limiter.qps == -1.0  # as client-go: QPS < 0 is no limit
        assert (given.client.limiter.qps, given.client.limiter.burst) == (20.0, 40)
    finally:
        unthrottled.close()
        given.close()


def test_the_schedulers_events_follow_its_kube_api_qps() -> None:
    runner = SchedulerRunner(cluster(500.0, 1000), RunConfig(leader_elect=False))
    try:
        recorder = runner.recorder
        assert isinstance(recorder, ApiRecorder)
        assert (recorder.client.limiter.qps, recorder.client.limiter.burst) == (500.0, 1000)
    finally:
        runner.recorder.close()
        runner.pool.shutdown()
        runner.feed.close()
