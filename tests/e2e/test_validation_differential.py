"""The validation differential: generated DRA objects, valid and invalid, sent to the real
API server with dryRun=All and compared with kubedra's verdict and field paths.

Documents come from tests/api/validation_docs.py (valid bases with one to three mutations at
the rules' edges). Both sides must accept, or both reject at the same set of field paths.
Hypothesis shrinks a disagreement to a smallest document; each one found while writing this
became a case of tests/api/test_validation.py (fixed) or is left out of the generators and
listed in docs/compatibility.md, "Validation" (classified).

`make e2e` runs a fixed-seed sample (DIFFERENTIAL_EXAMPLES, about a minute);
KUBEDRA_VALIDATION_DIFF=N runs N randomly seeded documents instead.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from kubedra.cluster.kubernetes import KubeStore
from tests.api.validation_docs import documents
from tests.e2e.test_validation_parity import kubedra_verdict, server_verdict

DIFFERENTIAL_EXAMPLES = 1000
LONG_RUN = int(os.environ.get("KUBEDRA_VALIDATION_DIFF", "0"))

_tally: Counter[str] = Counter()


@pytest.fixture(scope="module")
def kube(cluster: Any) -> Iterator[KubeStore]:
    store = cluster.store()
    yield store
    store.close()
    total = _tally["agree"] + _tally["differ"]
    print(
        f"\nvalidation differential: {total} documents, {_tally['agree']} agree "
        f"({_tally['rejected']} rejected by both, {_tally['accepted']} accepted by both)"
    )


@settings(
    max_examples=LONG_RUN or DIFFERENTIAL_EXAMPLES,
    derandomize=not LONG_RUN,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)
@given(doc=documents())
def test_kubedra_and_the_api_server_agree(kube: KubeStore, doc: dict[str, Any]) -> None:
    ours, theirs = kubedra_verdict(doc), server_verdict(kube, doc)
    _tally["agree" if ours == theirs else "differ"] += 1
    if ours == theirs:
        _tally["rejected" if ours else "accepted"] += 1
    assert ours == theirs, json.dumps(
        {"kubedra": sorted(ours), "server": sorted(theirs), "document": doc}, indent=1
    )
