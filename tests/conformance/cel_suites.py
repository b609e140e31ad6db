"""`python -m tests.conformance.cel_suites`: the public CEL conformance suites, measured.

Prints three reports and exits 1 if any is below its bar: the cel-spec simple tests
(`cel_spec`), Kubernetes' CEL library test expressions (`k8s_cel_suites`) and upstream's
DRA compile table (`dra_compile_table`). Needs Go 1.26+ (the oracle is built on first use
from tools/oracle, which also puts the pinned suites in the Go module cache).
"""

from __future__ import annotations

import sys

from tests.conformance import cel_spec, dra_compile_table, k8s_cel_suites
from tests.conformance.oracle import Oracle, build, unavailable


def main() -> int:
    why = unavailable()
    if why is not None:
        print(why, file=sys.stderr)
        return 2
    with Oracle(build()) as oracle:
        spec = cel_spec.measure(oracle)
        library = k8s_cel_suites.measure(oracle)
        table = dra_compile_table.measure(oracle)
    for report in (spec, library, table):
        print(report.render(), end="\n\n")
    below = [name for name, rate, bar in (("cel-spec", spec.rate, cel_spec.BAR),
                                          ("Kubernetes library", library.rate, cel_spec.BAR),
                                          ("DRA compile table", table.rate, 1.0))
             if rate < bar]  # fmt: skip
    if below:
        print(f"below the bar: {', '.join(below)}", file=sys.stderr)
    return 1 if below else 0


if __name__ == "__main__":
    sys.exit(main())
