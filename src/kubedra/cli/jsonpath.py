"""kubectl's JSONPath (`-o jsonpath=...`, `-o custom-columns=...`), as client-go's
`util/jsonpath` evaluates it for `kubectl get`.

A template is text with `{...}` actions: paths (`.items[*].metadata.name`, `..name`,
`['key']`, `[0]`, `[1:3]`, `[0,2]`, `[?(@.status == "x")]`), quoted text (`{"\\n"}`) and
`{range PATH}...{end}` loops. Missing keys and indexes print nothing (kubectl get turns on
allowMissingKeys); several results of one action are separated by a space; maps and lists
print as compact JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

Step = Callable[[Any], Iterator[Any]]


class JsonPathError(ValueError):
    """A template kubectl would refuse (`error parsing jsonpath ...`)."""


@dataclass(frozen=True)
class _Text:
    text: str


@dataclass(frozen=True)
class _Path:
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class _Range:
    path: _Path
    body: tuple[_Text | _Path | _Range, ...]


Node = _Text | _Path | _Range

_ACTION = re.compile(r"\{((?:[^{}\"']|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*')*)\}")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}


def compile_template(template: str) -> tuple[Node, ...]:
    """Parse a template; JsonPathError names what kubectl would call wrong."""
    nodes: list[Node] = []
    stack: list[tuple[_Path, list[Node]]] = []
    for part in _parts(template):
        if not isinstance(part, _Expr):
            nodes.append(_Text(part))
        elif part.startswith("range "):
            stack.append((_path(part[6:].strip(), template), nodes))
            nodes = []
        elif part == "end":
            if not stack:
                raise JsonPathError(f"error parsing jsonpath {template}, not in range")
            path, outer = stack.pop()
            outer.append(_Range(path, tuple(nodes)))
            nodes = outer
        else:
            nodes.append(_action(part, template))
    if stack:
        raise JsonPathError(f"error parsing jsonpath {template}, unclosed range")
    return tuple(nodes)


def _parts(template: str) -> Iterator[str | _Expr]:
    """Literal text (str) and the insides of actions (_Expr), in order."""
    pos = 0
    for m in _ACTION.finditer(template):
        if m.start() > pos:
            yield from _literal(template[pos : m.start()], template)
        yield _Expr(m.group(1).strip())
        pos = m.end()
    if pos < len(template):
        yield from _literal(template[pos:], template)


class _Expr(str):
    """The inside of one `{...}` (kept apart from literal text)."""


def _literal(text: str, template: str) -> Iterator[str]:
    if "{" in text:
        raise JsonPathError(f"error parsing jsonpath {template}, unclosed action")
    yield text


def _action(text: str, template: str) -> Node:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        return _Text(_unquote(text[1:-1]))
    return _path(text, template)


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), text)


# --- paths ---------------------------------------------------------------------------

_FIELD = re.compile(r"\.\.?([^.\[\]\s]*)")
_BRACKET = re.compile(r"\[((?:[^\]'\"]|'[^']*'|\"[^\"]*\")*)\]")
_SLICE = re.compile(r"^(-?\d*)(?::(-?\d*))?(?::(-?\d*))?$")


def _path(text: str, template: str) -> _Path:
    """`$.a.b[0]`, `.a..b`, `@.x` -> the steps from the root (or current) value."""
    steps: list[Step] = []
    pos = 1 if text[:1] in ("$", "@") else 0
    while pos < len(text):
        if text.startswith("..", pos):
            steps.append(_descend)
            pos += 1
            continue
        m = _FIELD.match(text, pos) if text[pos] == "." else _BRACKET.match(text, pos)
        if m is None or m.end() == pos:
            raise JsonPathError(f"error parsing jsonpath {template}, unrecognized {text[pos:]!r}")
        steps.append(_field(m.group(1)) if text[pos] == "." else _bracket(m.group(1), template))
        pos = m.end()
    return _Path(tuple(steps))


def _field(name: str) -> Step:
    if name in ("", "*"):
        return _children if name == "*" else _itself

    def step(value: Any) -> Iterator[Any]:
        if isinstance(value, dict) and name in value:
            yield value[name]

    return step


def _bracket(inside: str, template: str) -> Step:
    inside = inside.strip()
    if inside.startswith("?(") and inside.endswith(")"):
        return _filter(inside[2:-1].strip(), template)
    if inside == "*":
        return _children
    if "," in inside:
        parts = [_bracket(p, template) for p in inside.split(",")]
        return lambda value: (r for step in parts for r in step(value))
    if inside[:1] in ("'", '"'):
        return _field(inside[1:-1])
    m = _SLICE.match(inside)
    if m is None:
        raise JsonPathError(f"error parsing jsonpath {template}, invalid array index {inside}")
    return _index(m, ":" in inside)


def _index(m: re.Match[str], is_slice: bool) -> Step:
    start, stop, stride = (int(g) if g else None for g in m.groups())

    def step(value: Any) -> Iterator[Any]:
        if not isinstance(value, list):
            return iter(())
        if is_slice:
            return iter(value[slice(start, stop, stride)])
        at = start or 0
        return iter([value[at]]) if -len(value) <= at < len(value) else iter(())

    return step


def _itself(value: Any) -> Iterator[Any]:
    yield value


def _children(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        yield from value.values()
    elif isinstance(value, list):
        yield from value


def _descend(value: Any) -> Iterator[Any]:
    """`..`: the value and everything below it (the next step picks from all of them)."""
    yield value
    for child in _children(value):
        yield from _descend(child)


_COMPARE = re.compile(r"^(@[^\s<>=!]*)\s*(==|!=|<=|>=|<|>)\s*(.+)$")
_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    ">": lambda a, b: a > b,
    "<=": lambda a, b: a <= b,
    ">=": lambda a, b: a >= b,
}


def _filter(condition: str, template: str) -> Step:
    """`[?(@.a == "x")]`, `[?(@.a)]`: the list items for which the condition holds."""
    m = _COMPARE.match(condition)
    left = _path((m.group(1) if m else condition)[1:], template)
    compare = _OPERATORS[m.group(2)] if m else None
    right = _literal_value(m.group(3).strip()) if m else None

    def holds(item: Any) -> bool:
        found = list(evaluate(left, item))
        if compare is None:
            return bool(found)
        try:
            return any(compare(v, right) for v in found)
        except TypeError:  # kubectl: values of different types never compare true
            return False

    return lambda value: (item for item in _children(value) if holds(item))


def _literal_value(text: str) -> Any:
    if text[:1] in ("'", '"') and text[-1:] == text[:1]:
        return _unquote(text[1:-1])
    if text in ("true", "false"):
        return text == "true"
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def evaluate(path: _Path, data: Any) -> Iterator[Any]:
    """Every value the path finds in `data`, in document order."""
    found: list[Any] = [data]
    for step in path.steps:
        found = [out for value in found for out in step(value)]
    return iter(found)


# --- printing ------------------------------------------------------------------------


def execute(nodes: tuple[Node, ...], data: Any) -> str:
    """The template's text for `data` (kubectl's `-o jsonpath=` output, without a newline)."""
    out: list[str] = []
    for node in nodes:
        if isinstance(node, _Text):
            out.append(node.text)
        elif isinstance(node, _Range):
            out += [execute(node.body, item) for item in evaluate(node.path, data)]
        else:
            out.append(" ".join(text_of(v) for v in evaluate(node, data)))
    return "".join(out)


def values(nodes: tuple[Node, ...], data: Any) -> list[Any]:
    """Every value the template's paths find (custom-columns joins them with commas)."""
    found: list[Any] = []
    for node in nodes:
        if isinstance(node, _Path):
            found += evaluate(node, data)
    return found


def text_of(value: Any) -> str:
    """A value as kubectl prints it: maps and lists as compact JSON, the rest plainly."""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "<nil>"
    return str(value)


def relaxed(expression: str) -> str:
    """custom-columns' path: `.a.b`, `a.b` and `{.a.b}` all mean `{.a.b}` (kubectl's
    RelaxedJSONPathExpression)."""
    expression = expression.strip()
    if expression.startswith("{") and expression.endswith("}"):
        return expression
    return "{" + (expression if expression.startswith((".", "$", "[")) else "." + expression) + "}"
