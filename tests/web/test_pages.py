"""Every page whole on arrival (issue 38): the HTML a client without JavaScript gets (curl, a
slow link, a screenshot) holds the cluster: node names, the operator's counts, claims, pods,
explanations, the fragmentation with a time axis. Checked three ways on the demo store: the
bytes over HTTP, the text Chromium shows with no script run, and a plain `chromium
--headless --screenshot` (the way docs/images is made: `python -m tests.web.screenshots`)."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubedra.api.codec import decode_object
from kubedra.cluster import SqliteStore
from kubedra.web import pages
from kubedra.web.api import App
from kubedra.web.mirror import Mirror
from tests.web.browser import missing
from tests.web.conftest import ARTIFACTS, UiProcess, shot
from tests.web.screenshots import demo_store, heatmap_store, screenshot

NODES = ("a100-40x8-mig-0", "h100x8-0", "h100x8-1", "l4x4-0", "l4x4-1", "tpu-v5e-2x4-0")
# the demo, the legacy nvidia.com/gpu pod (a whole A100) and the MIG notebook scheduled:
# 32 GPUs (8 of them MIG-capable, each counted once) and 8 TPUs
COUNTS = {"nodes": "6", "accelerators": "40", "allocated": "2", "partial": "1", "free": "37",
          "tainted": "0", "unhealthy": "0", "partitions": "1", "nics": "0"}  # fmt: skip
# page -> what its HTML must hold, without any script run
EXPECTED = {
    "/": [*(f'data-node="{n}"' for n in NODES), "40</b> accelerators (32 GPUs, 8 TPUs)",
          "12</b> NICs in use", "1</b> MIG partitions in use"],
    "/fleet?mode=heat": [*(f'data-node="{n}"' for n in NODES), 'class="legend scale"',
                         "h100x8-0 · 1 of 8 accelerators in use · 12.5 % held"],
    "/workloads": ["vllm-gpu-claim", "train-16-gpus", "notebook-mig-", "vllm-inference",
                   "legacy-cuda-job-extended-resources-", "extended resources", "h100x8-0",
                   "gpu.nvidia.com/h100x8-0/gpu-0"],
    "/claims/default/vllm-gpu-claim": ["ResourceClaim default/vllm-gpu-claim", "high-memory-gpu",
                                       "NVIDIA H100 80GB HBM3", "vllm-inference", "h100x8-0"],
    "/pending": ["default/train-16", "what would make it fit:", "h100x8-1", "in pools"],
    "/pending?pod=default/train-16": ["default/train-16", "what would make it fit:"],
    "/fragmentation": ["allocated of 40 accelerators", "fragmented (FGD)", "a100-40x8-mig-0",
                       'data-series="allocation"', "time (the server&#x27;s clock)"],
}  # fmt: skip


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UiProcess]:
    ui = UiProcess("--store", str(demo_store(tmp_path_factory.mktemp("demo") / "demo.db")))
    yield ui
    ui.stop()


def fetch(ui: UiProcess, path: str) -> str:
    with urllib.request.urlopen(ui.url + path.lstrip("/"), timeout=30) as answer:
        assert answer.status == 200 and answer.headers["Content-Type"].startswith("text/html")
        return str(answer.read().decode())


def counts(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-count="(\w+)"[^>]*><b>([\d,]+)</b>', html))


def test_every_page_fetched_without_javascript_holds_the_cluster(demo: UiProcess) -> None:
    for path, wanted in EXPECTED.items():
        html = fetch(demo, path)
        assert [w for w in wanted if w not in html] == [], path
        assert "connecting" not in html  # what the first paint used to say, and no more
    assert counts(fetch(demo, "/")) == COUNTS
    # the fleet's accelerators are the fragmentation page's (one definition)
    with urllib.request.urlopen(demo.url + "api/fragmentation", timeout=30) as answer:
        assert '"accelerators":40' in answer.read().decode()


def test_the_extended_resource_claim_is_linked_to_its_pod(demo: UiProcess) -> None:
    """`nvidia.com/gpu: 1` served by a DeviceClass: the scheduler made the claim; the claim
    names its pod, the pod links its claim (through `extendedResourceClaimStatus`)."""
    html = fetch(demo, "/workloads")
    claim = re.search(r'href="/claims/default/(legacy-cuda-job-extended-resources-\w+)"', html)
    assert claim is not None
    row = html[html.index(f">{claim.group(1)}</a>"):].split("</tr>")[0]
    assert "extended resources" in row and "<td>legacy-cuda-job</td>" in row
    pods = html[html.index("<h2>Pods "):]
    pod_row = pods[pods.index("<td>legacy-cuda-job</td>"):].split("</tr>")[0]
    assert f'href="/claims/default/{claim.group(1)}"' in pod_row
    page = fetch(demo, f"/claims/default/{claim.group(1)}")
    assert "made by the scheduler for the extended resources of pod(s) legacy-cuda-job" in page


def test_legacy_and_unknown_parameters(demo: UiProcess) -> None:
    assert fetch(demo, "/index.html") == fetch(demo, "/fleet") == fetch(demo, "/")
    assert fetch(demo, "/fleet?mode=bogus&x=1") == fetch(demo, "/fleet")  # the size's default
    assert fetch(demo, "/claims") == fetch(demo, "/workloads")
    with pytest.raises(urllib.error.HTTPError) as missing_claim:
        fetch(demo, "/claims/default/missing")
    assert missing_claim.value.code == 404
    assert "ResourceClaim &quot;missing&quot; not found" in missing_claim.value.read().decode()


# page -> text a reader sees on it with no script run (Chromium's layout, `innerText`)
VISIBLE = {
    "/": [*NODES, "6 nodes", "40 accelerators (32 GPUs, 8 TPUs):", "2 allocated", "1 partly used",
          "37 free", "1 MIG partitions in use", "0 of 12 NICs in use", "NVIDIA H100 80GB HBM3"],
    "/workloads": ["vllm-gpu-claim", "train-16-gpus", "legacy-cuda-job", "extended resources",
                   "vllm-inference", "gpu.nvidia.com/h100x8-0/gpu-0"],
    "/claims/default/vllm-gpu-claim": ["ResourceClaim default/vllm-gpu-claim", "productName",
                                       "NVIDIA H100 80GB HBM3", "vllm-inference"],
    "/pending": ["default/train-16", "what would make it fit:", "h100x8-1"],
    "/fragmentation": ["allocated of 40 accelerators", "Most fragmented nodes", "a100-40x8-mig-0"],
}  # fmt: skip


def test_chromium_without_javascript_shows_every_page(demo: UiProcess, page: Any) -> None:
    """What a reader without JavaScript sees: the page's one script answered empty."""
    page.route("**/static/app.js", lambda route: route.fulfill(body="", content_type="text/javascript"))
    for path, wanted in VISIBLE.items():
        page.goto(demo.url + path.lstrip("/"))
        text = page.inner_text("body")
        assert [w for w in wanted if w not in text] == [], path
        assert page.inner_text("#live") == f"v{page.get_attribute('body', 'data-version')}"
        assert page.get_attribute("body", "data-rendered") is None  # no script ran
    page.goto(demo.url + "fragmentation")
    ticks = page.eval_on_selector_all("svg.chart text", "ts => ts.map(t => t.textContent)")
    assert any(re.fullmatch(r"\d\d:\d\d(:\d\d)?", t) for t in ticks)  # the time axis
    shot(page, "no-javascript-fragmentation")


@pytest.mark.skipif(missing() is not None, reason=f"no browser: {missing()}")
def test_a_plain_headless_screenshot_shows_the_devices(demo: UiProcess) -> None:
    """`chromium --headless --screenshot`, no wait for any script (Chromium's command line
    takes no screenshot with scripts off): the fleet's tiles are there, in their colours,
    free green and the held GPUs' blue."""
    from PIL import Image

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    taken = screenshot(demo.url + "fleet", ARTIFACTS / "plain-fleet.png")
    colours = {c for _, c in Image.open(taken).convert("RGB").getcolors(1 << 20) or ()}
    assert (134, 217, 154) in colours and (47, 111, 219) in colours  # --free, --allocated


# --- the pieces, without a server -------------------------------------------------------------


def test_heat_steps_show_any_use() -> None:
    """1 of 8 GPUs held used to look empty: any use is the first step of the scale."""
    assert [pages.heat_step(f) for f in (0, 0.001, 0.125, 0.126, 0.5, 0.99, 1.0)] == [0, 1, 1, 2, 4, 8, 8]


def fleet_data(nodes: int) -> dict[str, Any]:
    node = {"name": "n", "fill": 0.125, "accelerators": 8, "inUse": 1, "problems": [],
            "partitions": {}, "devices": []}  # fmt: skip
    summary = {"nodes": nodes, "admitted": 0, "partitionsInUse": 0, "partitionable": 0,
               "accelerators": dict.fromkeys(("total", "gpu", "tpu", "allocated", "partial",
                                              "free", "tainted", "unhealthy"), 0),
               "nics": {"total": 0, "inUse": 0}}  # fmt: skip
    return {"summary": summary, "filter": None, "classes": [],
            "groups": [{"name": "g", "nodes": [{**node, "name": f"n{i}"} for i in range(nodes)]}]}  # fmt: skip


def test_the_heat_map_is_the_default_above_200_nodes_with_a_fill_scale() -> None:
    small, large = (str(pages.fleet_page(fleet_data(n), {})) for n in (200, 201))
    assert 'class="heat"' not in small and 'class="legend"' in small
    assert 'class="heat"' in large and 'class="legend scale"' in large
    assert large.count('class="cell h1"') == 201 and "(201 nodes · 12.5 % held)" in large
    assert 'href="/fleet?mode=devices" id="mode"' in large
    assert 'class="heat"' in str(pages.fleet_page(fleet_data(3), {"mode": "heat"}))


def test_the_chart_has_a_time_axis() -> None:
    start = time.mktime((2026, 1, 5, 14, 0, 0, 0, 0, -1))  # 14:00:00 local
    points = [{"time": start + 60 * i, "version": i, "fragmentation": 0.1, "allocation": 0.05 * i}
              for i in range(11)]  # fmt: skip
    svg = str(pages.chart(points))
    labels = re.findall(r"<text [^>]*>(\d\d:\d\d(?::\d\d)?)</text>", svg)
    assert labels == ["14:00", "14:02", "14:04", "14:06", "14:08", "14:10"]
    assert "time (the server&#x27;s clock)" in svg and svg.count("<polyline") == 2
    one = str(pages.chart(points[:1]))  # one sample: the minute before it, a level line
    assert re.findall(r">(\d\d:\d\d(?::\d\d)?)</text>", one)[-1] == "14:00:00"
    assert "no sample yet" in str(pages.chart([]))


def test_object_names_are_text_in_the_html(tmp_path: Path) -> None:
    hostile = '<img src=x onerror="window.__pwned=1">'
    store = SqliteStore(tmp_path / "s.db")
    store.create(decode_object({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": hostile, "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": hostile}}]}},
    }).obj)  # fmt: skip
    app = App(Mirror(store).sync(), backend=hostile)
    for path in ("/workloads", "/claims/default/" + urllib.parse.quote(hostile, safe="")):
        body = app.get(path, {}).body.decode()
        assert "<img" not in body and "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;" in body


def test_the_heatmap_store_holds_every_step(tmp_path: Path) -> None:
    """The docs' heat map store: fills 0/8 to 8/8 over its nodes."""
    from kubedra.web.facts import Facts
    from kubedra.web.fleet import fleet_view

    store = SqliteStore(heatmap_store(tmp_path / "heat.db", nodes=9))
    view = fleet_view(Facts(Mirror(store).sync().snapshot()))
    fills = sorted(n["fill"] for g in view["groups"] for n in g["nodes"])
    assert [pages.heat_step(f) for f in fills] == list(range(9))
