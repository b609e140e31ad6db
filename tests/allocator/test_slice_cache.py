"""The slice cache keeps what a slice was worked out into (entries, pool, selector results)
from one `Inventory.build` to the next, by the slice object's identity: what a scheduler
reuses when one slice changes. These tests check that reuse never shows a stale answer:
a changed slice (a new object) is worked out afresh, a removed device is gone, taint
rules keep their inventory's own entries, and a truly cold start gives the same answers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kubedra.allocator import (
    AllocatedState,
    Allocation,
    Features,
    Inventory,
    NodeInfo,
    allocate,
    inventory,
)
from kubedra.allocator.inventory import SLICES, SliceCache, _slice_info, clear_slice_cache
from kubedra.api.resource import DeviceClass, ResourceSlice
from kubedra.cel import CelEvalError
from tests.allocator.fixtures import (
    CLASSES,
    NODE1,
    A,
    V,
    claim,
    dev,
    klass,
    req,
    slice_,
    taint_rule,
)

MODEL = f'device.attributes["{A}"].model == "a"'


@pytest.fixture(autouse=True)
def _cold() -> Iterator[None]:
    """Each test starts and ends with an empty cache (other tests' slices out of the way)."""
    clear_slice_cache()
    yield
    clear_slice_cache()


def _models(*models: str, name: str = "s", node: str = "node-1") -> ResourceSlice:
    return slice_(name, [dev(f"d{i}", {"model": m}) for i, m in enumerate(models)], node=node)


def _names(out: Allocation) -> list[list[str]] | None:
    """The device names each claim got, or None."""
    if out.results is None:
        return None
    return [[r.device for r in res.devices.results] for res in out.results]


def _one(inventory: Inventory, classes: dict[str, DeviceClass], node: NodeInfo = NODE1) -> object:
    """The devices one claim for one device of class-a gets on `node`, or None."""
    return _names(allocate([claim("c", req())], node, inventory, classes, AllocatedState()))


def test_an_unchanged_slice_keeps_its_entries_and_pool_across_builds() -> None:
    sl = _models("a", "b")
    first = Inventory.build([sl])
    second = Inventory.build([sl])
    assert second.slice_entries(sl) is first.slice_entries(sl)
    assert second.pools_for(NODE1)[0] is first.pools_for(NODE1)[0]
    # its selector results too: the entry numbers are the same, so are the answers
    entry = second.slice_entries(sl)[1]
    assert first.matches(MODEL, entry, strict=False) is False
    assert entry.index in second.selector(MODEL, False).results


def test_a_changed_slice_is_worked_out_afresh() -> None:
    old = _models("a", "b")
    classes = {"class-a": klass("class-a", A, [MODEL])}
    before = Inventory.build([old])
    assert _one(before, classes) == [["d0"]]
    # The same slice name and devices, the attribute changed: a new object, as an update is.
    new = _models("b", "a")
    after = Inventory.build([new])
    assert after.slice_entries(new) is not before.slice_entries(old)
    assert [e.index for e in after.slice_entries(new)] != [
        e.index for e in before.slice_entries(old)
    ]
    assert _one(after, classes) == [["d1"]]
    # the old inventory still answers from its own slice
    assert _one(before, classes) == [["d0"]]


def test_a_removed_device_is_gone_and_an_added_one_is_there() -> None:
    sl = _models("a", "a")
    assert _one(Inventory.build([sl]), CLASSES) == [["d0"]]
    fewer = slice_("s", [dev("d1", {"model": "a"})])
    assert _one(Inventory.build([fewer]), CLASSES) == [["d1"]]
    none = slice_("s", [])
    assert _one(Inventory.build([none]), CLASSES) is None
    more = slice_("s", [dev("d9", {"model": "a"})])
    assert _one(Inventory.build([more]), CLASSES) == [["d9"]]


def test_one_slice_changed_among_many_keeps_the_others() -> None:
    slices = [_models("a", name=f"s{i}", node=f"n{i}") for i in range(3)]
    first = Inventory.build(slices)
    kept = [first.slice_entries(s) for s in slices]
    changed = [slices[0], _models("z", name="s1", node="n1"), slices[2]]
    second = Inventory.build(changed)
    assert second.slice_entries(slices[0]) is kept[0]
    assert second.slice_entries(slices[2]) is kept[2]
    assert second.slice_entries(changed[1]) is not kept[1]
    classes = {"class-a": klass("class-a", A, [MODEL])}
    got = [_one(second, classes, NodeInfo(f"n{i}")) for i in range(3)]
    assert got == [[["d0"]], None, [["d0"]]]


def test_a_cleared_cache_starts_truly_cold_with_the_same_answers() -> None:
    sl = _models("b", "a")
    classes = {"class-a": klass("class-a", A, [MODEL])}
    warm = Inventory.build([sl])
    entries = warm.slice_entries(sl)
    answer = _one(warm, classes)
    clear_slice_cache()
    assert len(SLICES) == 0
    cold = Inventory.build([sl])
    assert cold.slice_entries(sl) is not entries
    assert cold.selector(MODEL, False).results == {}
    assert _one(cold, classes) == answer == [["d1"]]


def test_taint_rules_keep_their_own_entries() -> None:
    sl = _models("a")
    rule = taint_rule("r", {"key": "k", "effect": "NoSchedule"}, driver=A)
    tainted = Inventory.build([sl], [rule])
    plain = Inventory.build([sl])
    assert [t.key for t in tainted.slice_entries(sl)[0].taints] == ["k"]
    assert plain.slice_entries(sl)[0].taints == ()
    assert tainted.slice_entries(sl) is not plain.slice_entries(sl)
    assert _one(tainted, CLASSES) is None  # the rule's taint blocks the device
    assert _one(plain, CLASSES) == [["d0"]]
    # and the rule's inventory did not put its entries in the process's cache
    again = Inventory.build([sl])
    assert again.slice_entries(sl) is plain.slice_entries(sl)


def test_pools_kept_per_partitionable_switch() -> None:
    sl = _models("a")
    inventory = Inventory.build([sl])
    on = inventory.pools_for(NODE1)[0]
    off = Inventory.build([sl]).pools_for(NODE1, Features(partitionable_devices=False))[0]
    assert on is not off
    assert [e for e, _ in on.devices] == [e for e, _ in off.devices]


def test_a_device_that_fails_every_selector_still_fails_from_the_cache() -> None:
    # Five alike devices and one whose version does not parse, past the devices checked
    # one by one: its own error wherever its result comes from.
    devices = [dev(f"d{i}", {"model": "a", "v": V("1.0.0")}) for i in range(6)]
    devices.append(dev("bad", {"model": "a", "v": V("not-a-version")}))
    sl = slice_("s", devices)
    for _ in range(2):  # truly cold, then from the cache
        inventory = Inventory.build([sl])
        entries = inventory.slice_entries(sl)
        assert [inventory.matches(MODEL, e, strict=False) for e in entries[:6]] == [True] * 6
        with pytest.raises(CelEvalError, match="semantic version"):
            inventory.matches(MODEL, entries[6], strict=False)


def test_prepared_claims_do_not_carry_devices_between_inventories() -> None:
    c = claim("c", req(count=2))
    two = Inventory.build([_models("a", "a")])
    assert _names(allocate([c], NODE1, two, CLASSES, AllocatedState())) == [["d0", "d1"]]
    one = Inventory.build([slice_("s2", [dev("x0")])])
    assert allocate([c], NODE1, one, CLASSES, AllocatedState()).results is None
    three = Inventory.build([slice_("s3", [dev("y0"), dev("y1"), dev("y2")])])
    assert _names(allocate([c], NODE1, three, CLASSES, AllocatedState())) == [["y0", "y1"]]


def test_the_cache_is_swept_to_the_adding_inventorys_slices() -> None:
    cache = SliceCache(limit=4)
    old = [_models("a", name=f"old{i}") for i in range(4)]
    for sl in old:
        cache.add(_slice_info(sl), old)
    assert len(cache) == 4 and all(cache.get(sl) is not None for sl in old)
    current = [old[0], _models("a", name="new")]
    cache.add(_slice_info(current[1]), current)  # full: keeps only `current`'s slices
    assert len(cache) == 2
    assert cache.get(old[0]) is not None and cache.get(current[1]) is not None
    assert all(cache.get(sl) is None for sl in old[1:])
    # an id the cache knows, for another object, is a miss
    stranger = _models("a", name="stranger")
    assert cache.get(stranger) is None
    # a racing add of the same slice keeps the first info
    first = cache.get(old[0])
    assert cache.add(_slice_info(old[0]), current) is first


def test_selectors_start_over_past_their_bound_with_the_same_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(inventory, "_MAX_RESULTS", 3)
    sl = _models("b", "a", "b", "a")
    classes = {"class-a": klass("class-a", A, [MODEL])}
    first = Inventory.build([sl])
    entries = first.slice_entries(sl)
    got = [first.matches(MODEL, e, strict=False) for e in entries]
    assert got == [False, True, False, True]
    # 4 results stored with a bound of 3 (and the class's): the selector started over
    assert len(first.selector(MODEL, False).results) < len(entries)
    assert _one(Inventory.build([sl]), classes) == [["d1"]]


def test_a_new_version_replaces_the_old_in_the_cache_not_in_older_inventories() -> None:
    old = _models("a", "b")
    before = Inventory.build([old])
    entries = before.slice_entries(old)
    new = _models("b", "a")  # the same name: the next version of the slice
    after = Inventory.build([new])
    after.slice_entries(new)
    assert SLICES.get(old) is None and SLICES.get(new) is not None
    assert len(SLICES) == 1
    # the older inventory keeps what it made, even once the cache forgot it
    clear_slice_cache()
    assert before.slice_entries(old) is entries
    assert before.pools_for(NODE1)[0].devices[0][0] is entries[0]
    classes = {"class-a": klass("class-a", A, [MODEL])}
    assert _one(before, classes) == [["d0"]]
    assert _one(after, classes) == [["d1"]]
