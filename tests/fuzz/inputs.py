"""Manifest fuzzing harness: every input entry point on generated and mutated manifests.

Three sources: text mutations of the `examples/` manifests (spans deleted, repeated or
spliced with YAML and JSON syntax, invalid UTF-8, duplicated lines), structural mutations
(a random field of an example set to a hostile value, written as YAML or JSON), and
generated hostile documents (alias bombs, deep nesting, long numbers, oversized lists and
strings, odd keys and tags). Each input goes through `load_text`, `lint` (lenient and
strict: CEL compiles there), `apply` into a real store and `allocate`, the last two through
the real CLI. Invariant: every input loads or ends in kubedra's clear error (problems, or
exit 1 with `error: ...`), never another exception, within 10 s and 1 GiB.

`python -m tests.fuzz.inputs N [SEED]` runs N inputs and prints what it found.
"""

from __future__ import annotations

import copy
import json
import random
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from hypothesis import strategies as st

from kubedra.api.loader import load_text
from kubedra.cli.lint import lint_problems
from kubedra.cli.main import cli
from tests.fuzz.harness import Runs, main, run_drawn, span_edit

ROOT = Path(__file__).resolve().parents[2]

Input = tuple[str, str | bytes]  # (file name, content)


# -- the corpus ---------------------------------------------------------------------------


def examples() -> list[Input]:
    """Every example manifest, as written and as one JSON List."""
    found: list[Input] = []
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        found.append((path.name, text))
        docs = [d for d in yaml.safe_load_all(text) if d]
        found.append(
            (
                path.stem + ".json",
                json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, indent=1),
            )
        )
    return found


_TOKENS = [
    ": ", "- ", "-", ":", "{", "}", "[", "]", ",", "&a ", "*a", "<<: *a", "? ", "|", ">", "#",
    "---\n", "...\n", "~", "null", "!!binary ", "!!set ", "!!python/object ", "!!int ", "\t",
    "'", '"', "\\", "9" * 40, "9" * 5000, "1:" * 40, ".inf", ".nan", "0x", "true", "yes",
    "\n  ", "\n- ", "\ufeff", "é", "\U0001f600", "%TAG ! tag:x,2000:\n", "&a [*a]",
    '"kind": "List", "items": [1, ', '"x": NaN', "[" * 150, "{a: " * 120,
]  # fmt: skip
_BAD_BYTES = [b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x00", b"\xe2\x82"]


def mutate_text(rng: random.Random, text: str) -> str | bytes:
    """A few random edits: insert a token, delete, repeat or swap a span, duplicate a line
    (a duplicate key), re-indent; sometimes a byte that is not UTF-8. One in five keeps the
    manifests valid (comments, blank lines, a List around them) to reach the allocator."""
    if rng.random() < 0.2:
        return _harmless(rng, text)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        if op < 3:
            text = span_edit(rng, text, _TOKENS, 40)
        elif op == 3:
            lines = text.splitlines(keepends=True)
            if lines:
                i = rng.randrange(len(lines))
                lines.insert(i, lines[i])
                text = "".join(lines)
        elif op == 4:
            text = text.replace("\n  ", "\n" + " " * rng.randint(0, 5), rng.randint(1, 3))
        else:
            a, b = sorted(rng.randint(0, len(text)) for _ in range(2))
            text = text[b:] + text[a:b] + text[:a]
    if rng.random() < 0.1:
        data = text.encode()
        pos = rng.randint(0, len(data))
        return data[:pos] + rng.choice(_BAD_BYTES) + data[pos:]
    return text


def _harmless(rng: random.Random, text: str) -> str:
    lines = text.splitlines(keepends=True)
    for _ in range(rng.randint(1, 5)):
        lines.insert(rng.randint(0, len(lines)), rng.choice(["\n", "# a comment\n"]))
    return "".join(lines)


def _hostile_value(rng: random.Random) -> Any:
    choices: list[Callable[[], Any]] = [
        lambda: None, lambda: 2**63, lambda: -(2**63) - 1, lambda: 10**80, lambda: 1e308,
        lambda: "x" * rng.choice([64, 65, 10_241, 300_000]), lambda: [], lambda: {},
        lambda: [1, "a", None, {"k": []}], lambda: _nested(rng.choice([50, 99, 101, 400])),
        lambda: Deep(rng.choice([1001, 1500, 3000, 10_000])),
        lambda: {str(i): i for i in range(rng.choice([33, 129, 300]))},
        lambda: [{"name": f"d{i}"} for i in range(rng.choice([33, 129, 2000]))],
        lambda: "device.driver == 'x' && " + rng.choice(["(" * 300 + "1" + ")" * 300,
                                                           "lists.range(30000000).size() > 0",
                                                           "9" * 5000 + " > 0", "!" * 400 + "true"]),
        lambda: True, lambda: -1, lambda: 0, lambda: "Bad_Name", lambda: "a/b/c",
    ]  # fmt: skip
    return rng.choice(choices)()


def _nested(levels: int) -> Any:
    value: Any = "leaf"
    for i in range(levels):
        value = [value] if i % 2 else {"k": value}
    return value


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, child in items:
        yield from _paths(child, (*prefix, key))


def mutate_data(rng: random.Random, docs: list[Any]) -> Input:
    """One example's documents with random fields set to hostile values."""
    docs = copy.deepcopy(docs)
    deep: list[str] = []
    for _ in range(rng.randint(1, 3)):
        doc = rng.choice(docs)
        path = rng.choice(list(_paths(doc))[1:] or [("extra",)])
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = _hostile_value(rng)
        if isinstance(node[path[-1]], Deep):
            deep.append(node[path[-1]].text)
            node[path[-1]] = f"{_DEEP_MARK}{len(deep) - 1}"
    if rng.random() < 0.5:
        name, text = "mutated.json", json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    else:
        name, text = "mutated.yaml", yaml.safe_dump_all(docs, sort_keys=False, width=1 << 20)
    for i in reversed(range(len(deep))):  # marker 1 before marker 10 would match both
        text = text.replace(f'"{_DEEP_MARK}{i}"', deep[i]).replace(f"{_DEEP_MARK}{i}", deep[i])
    return name, text


_DEEP_MARK = "kubedra-fuzz-deep-"


@dataclass(frozen=True)
class Deep:
    """Nesting past Python's stack (1,000 frames), which no serializer writes: spliced into
    the text in flow syntax, valid JSON and YAML alike, at any field (apiVersion too)."""

    levels: int

    @property
    def text(self) -> str:
        if self.levels % 2:
            return '{"a": ' * self.levels + "1" + "}" * self.levels
        return "[" * self.levels + "]" * self.levels


_HEAD = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: gpu\n"


def hostile(rng: random.Random) -> Input:
    """A generated document aimed at one bound."""
    levels, fan = rng.randint(2, 10), rng.randint(2, 12)
    bomb = "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}" if i else "x"] * fan) + "]\n"
                   for i in range(levels))  # fmt: skip
    deep = rng.choice([90, 101, 600, 3000])
    generators: list[Callable[[], Input]] = [
        lambda: ("bomb.yaml", _HEAD + bomb),
        lambda: ("deep.yaml", _HEAD + "x: " + "[" * deep + "]" * deep + "\n"),
        lambda: ("deep.yaml", _HEAD + "x:\n" + "".join(" " * i + "- \n" for i in range(deep))),
        lambda: ("deep.json", '{"kind": "DeviceClass", "x": ' + "[" * deep + "]" * deep + "}"),
        lambda: ("number.yaml", _HEAD + "x: " + rng.choice(["9" * 5000, "1:" * 3000 + "1",
                                                           "0b" + "1" * 500, "-" + "9" * 200])),
        lambda: ("keys.yaml", _HEAD + rng.choice(["~: 1\n", "? [a]\n: 1\n", "1.5: a\n",
                                                  "zzz: 1\n~: 2\n", "x: 1\nx: 2\n"])),
        lambda: ("devices.yaml", "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\n"
                 "metadata: {name: s}\nspec:\n  driver: d.example.com\n  nodeName: n\n"
                 "  pool: {name: p, resourceSliceCount: 1}\n  devices:\n"
                 + "".join(f"  - name: d{i}\n" for i in range(rng.choice([129, 5000, 300_000])))),
        lambda: ("list.yaml", "apiVersion: v1\nkind: List\nitems:\n"
                 + "".join(rng.choice(["- 1\n", "- [a]\n", "- ~\n", "- {kind: Node}\n"])
                           for _ in range(rng.randint(1, 20)))),
        lambda: ("big.yaml", _HEAD + "x: &x " + "y" * rng.choice([100, 400_000]) + "\n"
                 + "z: [" + ", ".join(["*x"] * rng.randint(1, 12)) + "]\n"),
        lambda: ("cycle.yaml", _HEAD + "x: &x [*x]\n"),
    ]  # fmt: skip
    return rng.choice(generators)()


# -- running one input ---------------------------------------------------------------------


@dataclass
class Stats:
    inputs: int = 0
    loaded: int = 0  # inputs lint passes (warnings at most)
    refused: int = 0  # inputs lint refuses with clear errors
    sources: dict[str, int] = field(default_factory=dict)
    runs: Runs = field(default_factory=Runs)


def run_input(source: str, name: str, data: str | bytes, stats: Stats) -> None:
    """Every entry point on one input (crashes and runs over the bounds are recorded)."""
    stats.inputs += 1
    stats.sources[source] = stats.sources.get(source, 0) + 1
    shown = f"{source} {name} ({len(data):,} bytes): {data[:100]!r}"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
        refused = [
            stats.runs.run(step, fn, (), shown) for step, fn in _steps(str(path), data, name, tmp)
        ]
    stats.refused += refused[1] is True  # lint's verdict
    stats.loaded += refused[1] is False


def _steps(
    path: str, data: str | bytes, name: str, tmp: str
) -> Iterator[tuple[str, Callable[[], bool]]]:
    """(entry point, run): each run returns whether it refused the input."""

    def load() -> bool:
        result = load_text(data, name)
        return any(p.is_error for p in result.problems)

    def lint(strict: bool) -> bool:
        return any(p.is_error for p in lint_problems(load_text(data, name), strict))

    yield "load", load
    yield "lint", lambda: lint(False)
    yield "lint --strict", lambda: lint(True)
    yield "apply", lambda: _cli("--store", f"{tmp}/state.db", "apply", "-f", path)
    yield "allocate", lambda: _cli("allocate", "-f", path)


def _cli(*args: str) -> bool:
    """Run a command in-process; True when it refused (exit 1 with kubedra's `error: ...`)."""
    result = CliRunner().invoke(cli, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    if "Traceback" in result.output:
        raise AssertionError(f"traceback printed: {result.output[-300:]}")
    return result.exit_code != 0


# -- the run -------------------------------------------------------------------------------


def fuzz(count: int, seed_value: int = 0) -> Stats:
    """Run `count` inputs drawn from the three sources (reproducible for a given seed)."""
    stats = Stats()
    corpus = examples()
    parsed = [[d for d in yaml.safe_load_all(t) if d] for n, t in corpus if n.endswith(".yaml")]

    def text_mutation(n: int) -> tuple[str, Input]:
        name, text = corpus[n % len(corpus)]
        return "text mutation", (name, mutate_text(random.Random(seed_value ^ n), text))

    def data_mutation(n: int) -> tuple[str, Input]:
        return "structural mutation", mutate_data(
            random.Random(seed_value ^ n), parsed[n % len(parsed)]
        )

    def generated(n: int) -> tuple[str, Input]:
        return "generated", hostile(random.Random(seed_value ^ n))

    numbers = st.integers(min_value=0, max_value=2**32)
    inputs = st.one_of(
        numbers.map(text_mutation), numbers.map(data_mutation), numbers.map(generated)
    )

    def one(drawn: tuple[str, Input]) -> None:
        source, (name, data) = drawn
        run_input(source, name, data, stats)

    run_drawn(inputs, count, seed_value, one)
    return stats


def report(stats: Stats) -> str:
    sources = ", ".join(f"{n} {s}" for s, n in sorted(stats.sources.items()))
    head = (f"{stats.inputs} inputs ({sources}): {stats.loaded} pass lint, {stats.refused} "
            f"refused with clear errors; {stats.runs.summary()}")  # fmt: skip
    return "\n".join([head, *stats.runs.details()])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:], fuzz, report))
