"""Recursive-descent parser: CEL source text -> AST, with macros expanded to nodes."""

from __future__ import annotations

from kubedra.cel import ast
from kubedra.cel.errors import Issue
from kubedra.cel.lexer import RESERVED, Token, tokenize
from kubedra.cel.values import INT64_MAX

_RELATIONS = {"<": "_<_", "<=": "_<=_", ">": "_>_", ">=": "_>=_", "==": "_==_", "!=": "_!=_"}
_ADDITIVE = {"+": "_+_", "-": "_-_"}
_MULTIPLICATIVE = {"*": "_*_", "/": "_/_", "%": "_%_"}

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
    "sortBy": (2,),
}
_MAX_DEPTH = 250


def parse(source: str) -> ast.Node:
    """Parse a whole expression; raises `Issue` with the offending offset."""
    parser = _Parser(tokenize(source))
    node = parser.expr()
    tok = parser.peek()
    if tok.kind != "eof":
        raise Issue(f"Syntax error: mismatched input '{tok.text}' expecting <EOF>", tok.pos)
    return node


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

    # -- grammar -------------------------------------------------------------------------
    def expr(self) -> ast.Node:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise Issue("Syntax error: expression recursion limit exceeded", self.peek().pos)
        cond = self.logic("||")
        tok = self.accept("?")
        if tok is not None:
            then = self.logic("||")
            self.expect(":")
            cond = ast.Conditional(tok.pos, cond, then, self.expr())
        self.depth -= 1
        return cond

    def logic(self, op: str) -> ast.Node:
        left = self.logic("&&") if op == "||" else self.relation()
        while (tok := self.accept(op)) is not None:
            right = self.logic("&&") if op == "||" else self.relation()
            left = ast.Logic(tok.pos, op, left, right)
        return left

    def relation(self) -> ast.Node:
        left = self.additive()
        while True:
            tok = self.peek()
            if tok.kind == "op" and tok.text in _RELATIONS:
                self.next()
                left = ast.Call(tok.pos, _RELATIONS[tok.text], None, [left, self.additive()])
            elif tok.kind == "ident" and tok.text == "in":
                self.next()
                left = ast.Call(tok.pos, "@in", None, [left, self.additive()])
            else:
                return left

    def additive(self) -> ast.Node:
        return self._binary(self.multiplicative, _ADDITIVE)

    def multiplicative(self) -> ast.Node:
        return self._binary(self.unary, _MULTIPLICATIVE)

    def _binary(self, operand: object, table: dict[str, str]) -> ast.Node:
        assert callable(operand)
        left: ast.Node = operand()
        while (tok := self.peek()).kind == "op" and tok.text in table:
            self.next()
            left = ast.Call(tok.pos, table[tok.text], None, [left, operand()])
        return left

    def unary(self) -> ast.Node:
        tok = self.peek()
        if tok.kind == "op" and tok.text in ("!", "-"):
            self.next()
            if tok.text == "-" and self._negative_literal():
                return self.member_suffix(self._negated_number())
            return ast.Call(tok.pos, "!_" if tok.text == "!" else "-_", None, [self.unary()])
        return self.member()

    def _negative_literal(self) -> bool:
        tok = self.peek()
        return tok.kind == "num" and type(tok.value) in (int, float)

    def _negated_number(self) -> ast.Node:
        tok = self.next()
        value = tok.value
        assert isinstance(value, int | float)
        return ast.Literal(tok.pos - 1, -value)

    def member(self) -> ast.Node:
        return self.member_suffix(self.primary())

    def member_suffix(self, node: ast.Node) -> ast.Node:
        while True:
            tok = self.peek()
            if tok.kind == "op" and tok.text in (".", ".?"):
                self.next()
                name = self._ident()
                if tok.text == "." and self.accept("(") is not None:
                    node = self._member_call(node, name, tok.pos)
                else:
                    node = ast.Select(name.pos, node, name.text, optional=tok.text == ".?")
            elif tok.kind == "op" and tok.text in ("[", "[?"):
                self.next()
                index = self.expr()
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

    def primary(self) -> ast.Node:
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
            if tok.text == "(":
                inner = self.expr()
                self.expect(")")
                return inner
            if tok.text == "[":
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
        if self.accept("(") is not None:
            args = self._args(")")
            if tok.text == "has":
                return self._has(tok, args)
            return ast.Call(tok.pos, tok.text, None, args)
        return ast.Ident(tok.pos, tok.text)

    def _args(self, closer: str) -> list[ast.Node]:
        args: list[ast.Node] = []
        if self.accept(closer) is not None:
            return args
        while True:
            args.append(self.expr())
            if self.accept(closer) is not None:
                return args
            self.expect(",")
            if self.accept(closer) is not None:
                return args

    def _list(self, tok: Token) -> ast.Node:
        elements: list[ast.Node] = []
        optional: set[int] = set()
        while self.accept("]") is None:
            if self.accept("?") is not None:
                optional.add(len(elements))
            elements.append(self.expr())
            if self.accept(",") is None:
                self.expect("]")
                break
        return ast.ListLit(tok.pos, elements, frozenset(optional))

    def _map(self, tok: Token) -> ast.Node:
        entries: list[tuple[ast.Node, ast.Node, bool]] = []
        while self.accept("}") is None:
            optional = self.accept("?") is not None
            key = self.expr()
            self.expect(":")
            entries.append((key, self.expr(), optional))
            if self.accept(",") is None:
                self.expect("}")
                break
        return ast.MapLit(tok.pos, entries)

    # -- macros --------------------------------------------------------------------------
    def _has(self, tok: Token, args: list[ast.Node]) -> ast.Node:
        if len(args) != 1 or not isinstance(args[0], ast.Select) or args[0].optional:
            raise Issue("invalid argument to has() macro", tok.pos)
        sel = args[0]
        return ast.Select(sel.pos, sel.operand, sel.field, test_only=True)

    def _member_call(self, target: ast.Node, name: Token, dot: int) -> ast.Node:
        args = self._args(")")
        if isinstance(target, ast.Ident) and target.name == "cel" and name.text == "bind":
            return self._bind(name, args)
        counts = _MEMBER_MACROS.get(name.text)
        if counts is None or len(args) not in counts:
            return ast.Call(name.pos, name.text, target, args)
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


def _two_var(argc: int) -> frozenset[str]:
    """Macros whose call with `argc` arguments binds two variables."""
    if argc == 3:
        return frozenset({"all", "exists", "existsOne", "transformList", "transformMap"})
    if argc == 4:
        return frozenset({"transformList", "transformMap"})
    return frozenset()
