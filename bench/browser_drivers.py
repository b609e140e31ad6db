"""Playwright or Selenium for the browser tests: both driving Debian's Chromium (not part of
`make bench`; needs scripts/install-browser, `pip install playwright selenium` and Debian's
chromium-driver for Selenium).

    python -m bench.browser_drivers URL [RUNS]

Per driver: the median time to launch the browser, load URL, wait for the page to render,
read every console message and take a screenshot; how many of RUNS runs succeeded; the
installed size of the Python package and what it needs besides Chromium.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

from tests.web.browser import CHROMIUM, chromium_args, launch


def _size(names: list[str]) -> float:
    total = 0
    for name in names:
        dist = metadata.distribution(name)
        for f in dist.files or ():
            path = dist.locate_file(f)
            if os.path.exists(path):
                total += os.path.getsize(path)
    return total / 1e6


def with_playwright(url: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        browser = launch(p, profile)
        page = browser.new_page()
        messages: list[str] = []
        page.on("console", lambda m: messages.append(m.text))
        page.goto(url)
        page.wait_for_selector("body[data-rendered]")
        page.screenshot(path=os.path.join(profile, "shot.png"))
        browser.close()


def with_selenium(url: str) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    with tempfile.TemporaryDirectory() as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in [*chromium_args(), f"--user-data-dir={profile}"]:
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        driver = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
        try:
            driver.get(url)
            WebDriverWait(driver, 10).until(
                lambda d: d.execute_script("return document.body.dataset.rendered")
            )
            driver.get_log("browser")
            driver.save_screenshot(os.path.join(profile, "shot.png"))
        finally:
            driver.quit()


def measure(run: Callable[[str], None], url: str, runs: int) -> tuple[float, int]:
    times, ok = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        try:
            run(url)
            ok += 1
            times.append(time.perf_counter() - start)
        except Exception as err:  # counted as a failed run
            print(f"{run.__name__}: {err}", file=sys.stderr)
    return (statistics.median(times) if times else float("nan")), ok


def main(argv: list[str]) -> int:
    url, runs = argv[0], int(argv[1]) if len(argv) > 1 else 10
    result = {}
    for name, run, dists in (
        ("playwright", with_playwright, ["playwright", "greenlet"]),
        (
            "selenium",
            with_selenium,
            [
                "selenium",
                "trio",
                "trio-websocket",
                "websocket-client",
                "outcome",
                "sniffio",
                "sortedcontainers",
                "attrs",
                "wsproto",
                "h11",
                "PySocks",
                "certifi",
            ],
        ),
    ):
        median, ok = measure(run, url, runs)
        result[name] = {"median s": round(median, 3), "ok": f"{ok}/{runs}", "MB": _size(dists)}
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
