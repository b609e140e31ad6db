"""The repository itself: no merge left its conflict markers in a tracked file."""

from __future__ import annotations

import re
import subprocess

from tests.conftest import REPO

MARKER = re.compile(rb"^(<{7} |>{7} |={7}$)", re.MULTILINE)


def test_no_tracked_file_holds_merge_conflict_markers() -> None:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True)
    files = [f for f in listed.stdout.decode().split("\0") if f]
    assert files, "git ls-files listed nothing"
    marked = [f for f in files if (REPO / f).is_file() and MARKER.search((REPO / f).read_bytes())]
    assert marked == []
