"""HTML built in Python, escaped by construction: the pages' one way to make markup.

`tag("td", {"title": name}, name)` escapes the text and the attribute value; only
`Markup`, which this module makes, passes through unescaped. Object names and attribute
strings are user input (a claim may be called `<img src=x onerror=...>`): they reach the
page as text, never as markup, and the page's CSP forbids inline script besides.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from urllib.parse import quote, urlencode

Attribute = str | int | float | bool | None

# Void elements: no children, no end tag.
_VOID = frozenset({"br", "img", "input", "link", "meta", "hr"})


class Markup(str):
    """A string of HTML made by this module (or a constant of the pages): not escaped again."""

    __slots__ = ()


def escape(value: object) -> Markup:
    """Text (or a number) as HTML; `Markup` unchanged."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value), quote=True))


def render(children: object) -> Markup:
    """Children as HTML: text escaped, Markup kept, None and False dropped, lists flattened."""
    if children is None or children is False:
        return Markup()
    if isinstance(children, str | int | float):
        return escape(children)
    if isinstance(children, Iterable):
        return Markup("".join(render(c) for c in children))
    raise TypeError(f"not HTML: {type(children).__name__}")


def tag(name: str, attrs: Mapping[str, Attribute] | None = None, *children: object) -> Markup:
    """`<name attr="value">children</name>`; an attribute None or False is left out, True is
    written bare. `name` and the attribute names are the pages' constants, never input."""
    parts = [name]
    for key, value in (attrs or {}).items():
        if value is None or value is False:
            continue
        parts.append(key if value is True else f'{key}="{escape(value)}"')
    opening = f"<{' '.join(parts)}>"
    if name in _VOID:
        return Markup(opening)
    return Markup(f"{opening}{render(children)}</{name}>")


def path(*segments: str) -> str:
    """A URL path of segments, each percent-encoded on its own (a name may hold a slash)."""
    return "/" + "/".join(quote(s, safe="") for s in segments)


def url(base: str, params: Mapping[str, str]) -> str:
    """`base?k=v&...` with the non-empty parameters (none: `base` alone)."""
    kept = {k: v for k, v in params.items() if v}
    return f"{base}?{urlencode(kept)}" if kept else base
