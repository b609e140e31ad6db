"""Pratt parser: CEL source text -> AST, with macros expanded to nodes.

Hostile input must fail with one clear error long before Python's own stack runs out, in
the parser and in every later pass over the tree (checker, cost estimator, compiler and
the compiled closures all recurse over it). So, as cel-go does, two limits apply:

- the parser's own recursion is bounded (cel-go: "expression recursion limit exceeded");
  the parser spends about two Python frames per nesting level;
- the height of the produced tree is bounded (cel-go's visitor: "max recursion depth
  exceeded"), which also catches flat chains such as `1 + 1 + ... + 1` that the parser
  reads with a loop but that every later pass would recurse through.

Like cel-go, the parser balances `&&`/`||` chains (so `a && b && ...` stays shallow) and
collapses runs of `!`/`-` by parity (cel-go's VisitLogicalNot/VisitNegate).
"""

from __future__ import annotations

from kubedra.cel import ast
from kubedra.cel.errors import Issue
from kubedra.cel.lexer import RESERVED, Token, tokenize
from kubedra.cel.patterns import children
from kubedra.cel.values import INT64_MAX

# cel-go's ExpressionSizeCodePointLimit default.
MAX_CODE_POINTS = 100_000
# The parser's recursion budget (cel-go: 250 levels). A parenthesis costs one level (two
# Python frames), an argument list, list or map literal two (up to five frames), so the
# parser never needs more than about 500 frames.
MAX_RECURSION_DEPTH = 200
# Tree height kubedra accepts (cel-go: 250); see docs/compatibility.md. Every pass over the
# tree uses at most about three frames per level, so this leaves room below Python's limit
# of 1000 frames for the caller's own stack.
MAX_TREE_HEIGHT = 120

_RELATIONS = {"<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "==": "_==_", "!=": "_!=_"}
_ARITHMETIC = {"+": "_+_", "-": "_-_", "*": "_*_", "/": "_/_", "%": "_%_"}
# Binding power of each infix operator (the ternary `?` binds weakest, at 0).
_PRECEDENCE = {"?": 0, "||": 1, "&&": 2, "in": 3, "+": 4, "-": 4, "*": 5, "/": 5, "%": 5}
_PRECEDENCE.update(dict.fromkeys(_RELATIONS, 3))

# Receiver-style macros: name -> accepted argument counts (first argument(s) are variables).
_MEMBER_MACROS = {
    "all": (2, 3),
    "exists": (2, 3),
    "exists_one": (2,),
    "existsOne": (3,),
    "map": (2, 3),
    "filter": (2,),
    "transformList": (3, 4),
    "transformMap": (3, 4),
    "transformMapEntry": (3, 4),
    "sortBy": (2,),
    "optMap": (2,),
    "optFlatMap": (2,),
}


def parse(source: str) -> ast.Node:
    """Parse a whole expression; raises `Issue` with the offending offset."""
    if len(source) > MAX_CODE_POINTS:
        raise Issue(
            f"expression code point size exceeds limit: size: {len(source)}, "
            f"limit {MAX_CODE_POINTS}",
            0,
        )
    parser = _Parser(tokenize(source))
    node = parser.expression(0)
    tok = parser.peek()
    if tok.kind != "eof":
        raise Issue(f"Syntax error: mismatched input '{tok.text}' expecting <EOF>", tok.pos)
    _check_height(node)
    return node


def _check_height(root: ast.Node) -> None:
    """Reject trees taller than MAX_TREE_HEIGHT (iteratively: the tree may be very deep)."""
    stack = [(root, 1)]
    while stack:
        node, height = stack.pop()
        if height > MAX_TREE_HEIGHT:
            raise Issue(f"max recursion depth exceeded: {MAX_TREE_HEIGHT}", node.pos)
        stack.extend((child, height + 1) for child in children(node))


def _infix(tok: Token) -> int | None:
    if tok.kind == "op" or (tok.kind == "ident" and tok.text == "in"):
        return _PRECEDENCE.get(tok.text)
    return None


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.i = 0
        self.depth = 0

    # -- token helpers -------------------------------------------------------------------
    def peek(self) -> Token:
        return self.tokens[self.i]

    def next(self) -> Token:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def accept(self, text: str) -> Token | None:
        tok = self.tokens[self.i]
        if tok.kind == "op" and tok.text == text:
            self.i += 1
            return tok
        return None

    def expect(self, text: str) -> Token:
        tok = self.accept(text)
        if tok is None:
            bad = self.peek()
            raise Issue(f"Syntax error: mismatched input '{bad.text}' expecting '{text}'", bad.pos)
        return tok

    def _enter(self, levels: int = 1) -> None:
        """Count levels of the parser's recursion (the caller gives them back)."""
        self.depth += levels
        if self.depth > MAX_RECURSION_DEPTH:
            raise Issue(f"expression recursion limit exceeded: {MAX_RECURSION_DEPTH}",
                        self.peek().pos)  # fmt: skip

    # -- grammar -------------------------------------------------------------------------
    def expression(self, min_prec: int) -> ast.Node:
        """Operators binding at least `min_prec` (0: a whole expression, ternary included)."""
        self._enter()
        left = self.operand()
        while (prec := _infix(tok := self.peek())) is not None and prec >= min_prec:
            self.next()
            if tok.text == "?":
                then = self.expression(1)
                self.expect(":")
                left = ast.Conditional(tok.pos, left, then, self.expression(0))
            elif tok.text in ("&&", "||"):
                left = self._logic_chain(tok, left, prec)
            else:
                right = self.expression(prec + 1)
                function = _RELATIONS.get(tok.text) or _ARITHMETIC.get(tok.text) or "@in"
                left = ast.Call(tok.pos, function, None, [left, right])
        self.depth -= 1
        return left

    def _logic_chain(self, first_op: Token, left: ast.Node, prec: int) -> ast.Node:
        terms, ops = [left, self.expression(prec + 1)], [first_op]
        while (tok := self.accept(first_op.text)) is not None:
            ops.append(tok)
            terms.append(self.expression(prec + 1))
        return _balanced(first_op.text, terms, ops, 0, len(terms) - 1)

    def operand(self) -> ast.Node:
        """Prefix operators, a primary expression and its member suffixes."""
        tok = self.peek()
        if tok.kind == "op" and tok.text in ("!", "-"):
            return self._prefixed(tok)
        if tok.kind == "op" and tok.text == "(":  # here, not in _primary: one frame less
            self.next()
            inner = self.expression(0)
            self.expect(")")
            return self._suffixes(inner)
        return self._suffixes(self._primary())

    def _prefixed(self, tok: Token) -> ast.Node:
        count = 0
        while self.accept(tok.text) is not None:
            count += 1
        if tok.text == "-" and self._numeric_literal_next():
            count -= 1  # the last `-` belongs to the literal (so INT64_MIN can be written)
            inner = self._suffixes(self._negated_number())
        else:
            self._enter()  # a different prefix operator follows: one more level
            inner = self.operand()
            self.depth -= 1
        if count % 2 == 0:
            return inner
        return ast.Call(tok.pos, "!_" if tok.text == "!" else "-_", None, [inner])

    def _numeric_literal_next(self) -> bool:
        tok = self.peek()
        return tok.kind == "num" and type(tok.value) in (int, float)

    def _negated_number(self) -> ast.Node:
        tok = self.next()
        value = tok.value
        assert isinstance(value, int | float)
        return ast.Literal(tok.pos - 1, -value)

    def _suffixes(self, node: ast.Node) -> ast.Node:
        while True:
            tok = self.peek()
            if tok.kind == "op" and tok.text in (".", ".?"):
                self.next()
                if self.peek().kind == "escident":  # a selection only, never a call
                    field = self.next()
                    node = ast.Select(tok.pos, node, str(field.value), optional=tok.text == ".?")
                    continue
                name = self._ident()
                paren = self.accept("(") if tok.text == "." else None
                if paren is not None:
                    node = self._member_call(node, name, paren.pos)
                else:
                    # cel-go places a selection at its "." (or ".?").
                    node = ast.Select(tok.pos, node, name.text, optional=tok.text == ".?")
            elif tok.kind == "op" and tok.text in ("[", "[?"):
                self.next()
                self._enter()
                index = self.expression(0)
                self.depth -= 1
                self.expect("]")
                node = ast.Index(tok.pos, node, index, optional=tok.text == "[?")
            else:
                return node

    def _ident(self) -> Token:
        tok = self.next()
        if tok.kind != "ident":
            message = f"Syntax error: mismatched input '{tok.text}' expecting IDENTIFIER"
            raise Issue(message, tok.pos)
        return tok

    def _primary(self) -> ast.Node:
        tok = self.next()
        if tok.kind == "num":
            if type(tok.value) is int and tok.value > INT64_MAX:
                raise Issue("invalid int literal", tok.pos)
            return ast.Literal(tok.pos, tok.value)
        if tok.kind == "str":
            return ast.Literal(tok.pos, tok.value)
        if tok.kind == "ident":
            return self._identifier(tok)
        if tok.kind == "op":
            if tok.text in ("[", "[?"):
                return self._list(tok)
            if tok.text == "{":
                return self._map(tok)
            if tok.text == "." and self.peek().kind == "ident":
                return self._identifier(self.next())
        raise Issue(f"Syntax error: mismatched input '{tok.text}'", tok.pos)

    def _identifier(self, tok: Token) -> ast.Node:
        literals = {"true": True, "false": False, "null": None}
        if tok.text in literals:
            return ast.Literal(tok.pos, literals[tok.text])
        if tok.text in RESERVED or tok.text == "in":
            raise Issue(f"Syntax error: reserved identifier '{tok.text}'", tok.pos)
        paren = self.accept("(")
        if paren is not None:
            args = self._args(")")
            if tok.text == "has":
                return self._has(tok, args)
            return ast.Call(paren.pos, tok.text, None, args)  # cel-go: a call is at its "("
        return ast.Ident(tok.pos, tok.text)

    def _args(self, closer: str) -> list[ast.Node]:
        self._enter()
        args: list[ast.Node] = []
        while self.accept(closer) is None:
            args.append(self.expression(0))
            if self.accept(closer) is not None:
                break
            self.expect(",")
        self.depth -= 1
        return args

    def _list(self, tok: Token) -> ast.Node:
        """`[a, ?b]`; the lexer reads `[?` as one token, so a leading optional is `[?`."""
        self._enter()
        elements: list[ast.Node] = []
        optional: set[int] = set()
        first_optional = tok.text == "[?"
        while first_optional or self.accept("]") is None:
            if first_optional or self.accept("?") is not None:
                optional.add(len(elements))
                first_optional = False
            elements.append(self.expression(0))
            if self.accept(",") is None:
                self.expect("]")
                break
        self.depth -= 1
        return ast.ListLit(tok.pos, elements, frozenset(optional))

    def _map(self, tok: Token) -> ast.Node:
        self._enter()
        entries: list[tuple[ast.Node, ast.Node, bool]] = []
        while self.accept("}") is None:
            optional = self.accept("?") is not None
            key = self.expression(0)
            self.expect(":")
            entries.append((key, self.expression(0), optional))
            if self.accept(",") is None:
                self.expect("}")
                break
        self.depth -= 1
        return ast.MapLit(tok.pos, entries)

    # -- macros --------------------------------------------------------------------------
    def _has(self, tok: Token, args: list[ast.Node]) -> ast.Node:
        if len(args) != 1 or not isinstance(args[0], ast.Select) or args[0].optional:
            raise Issue("invalid argument to has() macro", tok.pos)
        sel = args[0]
        return ast.Select(sel.pos, sel.operand, sel.field, test_only=True)

    def _member_call(self, target: ast.Node, name: Token, paren: int) -> ast.Node:
        args = self._args(")")
        if isinstance(target, ast.Ident) and target.name == "cel" and name.text == "bind":
            return self._bind(name, args)
        counts = _MEMBER_MACROS.get(name.text)
        if counts is None or len(args) not in counts:
            return ast.Call(paren, name.text, target, args)
        variables = 2 if name.text in _two_var(len(args)) else 1
        names = [self._macro_var(a, name) for a in args[:variables]]
        kind = name.text
        if kind == "map" and len(args) == 3:
            kind = "map_filter"
        return ast.Comprehension(
            name.pos, kind, target, names[0], names[1] if variables == 2 else None,
            args[variables:],
        )  # fmt: skip

    def _bind(self, name: Token, args: list[ast.Node]) -> ast.Node:
        if len(args) != 3:
            raise Issue("cel.bind() requires 3 arguments", name.pos)
        var = self._macro_var(args[0], name)
        empty = ast.ListLit(name.pos, [])
        return ast.Comprehension(name.pos, "bind", empty, var, None, args[1:])

    @staticmethod
    def _macro_var(node: ast.Node, name: Token) -> str:
        if not isinstance(node, ast.Ident):
            raise Issue(f"{name.text}() variable name must be a simple identifier", node.pos)
        return node.name


def _balanced(op: str, terms: list[ast.Node], ops: list[Token], lo: int, hi: int) -> ast.Node:
    """A balanced tree of `op` over terms[lo..hi] (cel-go's balancer for logic chains)."""
    if lo == hi:
        return terms[lo]
    mid = (lo + hi + 1) // 2
    left = _balanced(op, terms, ops, lo, mid - 1)
    right = _balanced(op, terms, ops, mid, hi)
    return ast.Logic(ops[mid - 1].pos, op, left, right)


def _two_var(argc: int) -> frozenset[str]:
    """Macros whose call with `argc` arguments binds two variables."""
    if argc == 3:
        return frozenset({"all", "exists", "existsOne", "transformList", "transformMap",
                          "transformMapEntry"})  # fmt: skip
    if argc == 4:
        return frozenset({"transformList", "transformMap", "transformMapEntry"})
    return frozenset()
