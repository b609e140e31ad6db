"""kubedra's gangs next to kube-scheduler v1.37.2's own gang scheduling, on the dev cluster
with the workload gates on (`bench.gangs_vs_kube`, a few of its scenarios): kubedra never
leaves GPUs allocated to a gang below minCount, places exactly one of two gangs that each
fit alone, all of a gang that fits and none of one larger than the cluster; the same
scenarios run under kube-scheduler too (its placements are reported, not asserted)."""

from __future__ import annotations

import pytest
from bench.gangs_vs_kube import SCENARIOS, GroupResult, run, table

from kubedra.devcluster.binaries import Binaries

SUBSET = ("fits", "competing", "larger-than-cluster", "group-claim")
SETTLE = 8.0


@pytest.fixture(scope="module")
def scenarios() -> list:  # type: ignore[type-arg]
    return [sc for sc in SCENARIOS if sc.id in SUBSET]


@pytest.fixture(scope="module")
def kubedra(control_plane: Binaries, scenarios: list) -> list[GroupResult]:  # type: ignore[type-arg]
    return run("kubedra", scenarios, SETTLE)


@pytest.fixture(scope="module")
def kube(control_plane: Binaries, scenarios: list) -> list[GroupResult]:  # type: ignore[type-arg]
    return run("kube-scheduler", scenarios, SETTLE)


def by_group(results: list[GroupResult]) -> dict[tuple[str, str], GroupResult]:
    return {(r.scenario, r.group): r for r in results}


def test_kubedra_leaves_no_gpus_idle_in_half_placed_gangs(kubedra: list[GroupResult]) -> None:
    assert {r.scenario for r in kubedra} == set(SUBSET)
    assert [r for r in kubedra if r.idle_gpus or r.outcome == "partial"] == []


def test_kubedra_places_exactly_one_of_two_competing_gangs(kubedra: list[GroupResult]) -> None:
    got = by_group(kubedra)
    outcomes = sorted(got["competing", g].outcome for g in ("a", "b"))
    assert outcomes == ["all", "none"], outcomes


def test_kubedra_places_what_fits_and_nothing_of_what_does_not(
    kubedra: list[GroupResult],
) -> None:
    got = by_group(kubedra)
    assert got["fits", "g"].outcome == "all" and got["fits", "g"].condition == "True/Scheduled"
    assert got["group-claim", "g"].outcome == "all"
    assert got["group-claim", "g"].nodes and len(got["group-claim", "g"].nodes) == 1
    big = got["larger-than-cluster", "g"]
    assert (big.outcome, big.condition) == ("none", "False/Unschedulable")


def test_the_comparison_runs_for_kube_scheduler(
    kube: list[GroupResult], kubedra: list[GroupResult], scenarios: list  # type: ignore[type-arg]
) -> None:
    assert {(r.scenario, r.group) for r in kube} == {(r.scenario, r.group) for r in kubedra}
    print(table(scenarios, kube + kubedra))
