"""Coverage-guided fuzzing of load + lint with atheris (optional: not a dependency).

    .venv/bin/pip install atheris
    .venv/bin/python -m tests.fuzz.atheris_inputs -max_total_time=180 -rss_limit_mb=2048 \
        -timeout=10 CORPUS_DIR   # a directory with copies of the examples/ manifests

Any exception that escapes (a problem is a clear error, never an exception) is a crash;
figures and the decision not to depend on it are in docs/decisions.md.
"""

import sys

import atheris

with atheris.instrument_imports(include=["kubedra"]):
    from kubedra.api.loader import load_text
    from kubedra.cli.lint import lint_problems


def one(data: bytes) -> None:
    name = "x.json" if data.lstrip()[:1] in (b"{", b"[") else "x.yaml"
    lint_problems(load_text(data, name))


if __name__ == "__main__":
    atheris.Setup(sys.argv, one)
    atheris.Fuzz()
