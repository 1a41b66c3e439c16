"""JMS message selectors (compatibility C8): the SQL-92 subset of JMS 1.1, as ActiveMQ 5.17 runs it.

``compile_selector(text)`` parses once, by recursive descent, into a tree of closures; each
closure takes a ``lookup(name)`` that returns a header or property value (None when absent)
and returns a value. Values are Python ``int``/``float``/``str``/``bool`` or ``None``, and
``None`` doubles as SQL's UNKNOWN: comparisons and arithmetic with NULL are UNKNOWN, and
AND/OR/NOT follow the three-valued truth tables. A message matches only when the whole
expression is TRUE.

Where JMS leaves room, ActiveMQ's choices hold: comparing values of different types (a
string with a number, a boolean with a number) is FALSE, not an error, and ``<>`` is NOT of
``=`` (so TRUE for them); strings and booleans may be ordered among themselves; a string
property is converted to a number only behind ``convert_string_expressions:`` (STOMP's
selectors); integer division truncates, and division by zero is UNKNOWN. ``matches`` never
raises.

Precedence, loosest first: OR, AND, NOT, comparison/BETWEEN/IN/LIKE/IS, + -, * /, unary.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Final

from dovecote.core.errors import InvalidSelectorError

Value = bool | int | float | str | bytes | None
Lookup = Callable[[str], Value]
Node = Callable[[Lookup], Value]

_KEYWORDS: Final = frozenset(
    {"AND", "OR", "NOT", "BETWEEN", "LIKE", "ESCAPE", "IN", "IS", "NULL", "TRUE", "FALSE"}
)
_TOKEN: Final = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<string>'(?:[^']|'')*')
  | (?P<float>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?|\d+[eE][+-]?\d+[fFdD]?|\d+[fFdD])
  | (?P<hex>0[xX][0-9a-fA-F]+[lL]?)
  | (?P<int>\d+[lL]?)
  | (?P<ident>[A-Za-z_$][A-Za-z0-9_$.]*)
  | (?P<op><>|!=|<=|>=|=|<|>|\+|-|\*|/|\(|\)|,)
    """,
    re.VERBOSE,
)


class _Token:
    __slots__ = ("kind", "pos", "text", "value")

    def __init__(self, kind: str, text: str, value: Value, pos: int) -> None:
        self.kind = kind
        self.text = text
        self.value = value
        self.pos = pos


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos] == "'":
                raise InvalidSelectorError(text, f"unterminated string at position {pos}")
            raise InvalidSelectorError(text, f"unexpected character {text[pos]!r} at {pos}")
        kind = m.lastgroup or ""
        raw = m.group()
        if kind == "string":
            tokens.append(_Token("literal", raw, raw[1:-1].replace("''", "'"), pos))
        elif kind == "float":
            tokens.append(_Token("literal", raw, float(raw.rstrip("fFdD")), pos))
        elif kind == "hex":
            tokens.append(_Token("literal", raw, int(raw.rstrip("lL"), 16), pos))
        elif kind == "int":
            digits = raw.rstrip("lL")
            octal = len(digits) > 1 and digits[0] == "0"
            if octal and any(d in "89" for d in digits):
                raise InvalidSelectorError(text, f"invalid octal number {raw!r} at {pos}")
            tokens.append(_Token("literal", raw, int(digits, 8 if octal else 10), pos))
        elif kind == "ident":
            upper = raw.upper()
            if upper in ("TRUE", "FALSE"):
                tokens.append(_Token("literal", raw, upper == "TRUE", pos))
            elif upper == "NULL":
                tokens.append(_Token("NULL", raw, None, pos))
            elif upper in _KEYWORDS:
                tokens.append(_Token(upper, raw, None, pos))
            else:
                tokens.append(_Token("ident", raw, raw, pos))
        elif kind == "op":
            tokens.append(_Token(raw, raw, None, pos))
        pos = m.end()
    tokens.append(_Token("end", "", None, len(text)))
    return tokens


# -- value semantics -----------------------------------------------------------------------


def _is_number(v: Value) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _comparable(a: Value, b: Value) -> bool:
    if _is_number(a):
        return _is_number(b)
    return type(a) is type(b) and isinstance(a, str | bool)


def _truth(v: Value) -> bool | None:
    return v if isinstance(v, bool) else None


def _and(left: Node, right: Node) -> Node:
    def node(get: Lookup) -> Value:
        a = _truth(left(get))
        if a is False:
            return False
        b = _truth(right(get))
        if b is False:
            return False
        return True if a and b else None

    return node


def _or(left: Node, right: Node) -> Node:
    def node(get: Lookup) -> Value:
        a = _truth(left(get))
        if a is True:
            return True
        b = _truth(right(get))
        if b is True:
            return True
        return False if a is False and b is False else None

    return node


def _not(inner: Node) -> Node:
    def node(get: Lookup) -> Value:
        v = _truth(inner(get))
        return None if v is None else not v

    return node


_ORDER: Final[dict[str, Callable[[object, object], bool]]] = {
    "<": lambda a, b: a < b,  # type: ignore[operator]
    "<=": lambda a, b: a <= b,  # type: ignore[operator]
    ">": lambda a, b: a > b,  # type: ignore[operator]
    ">=": lambda a, b: a >= b,  # type: ignore[operator]
}
_EQUALITY: Final = frozenset({"=", "<>", "!="})

CONVERT_STRINGS_PREFIX: Final = "convert_string_expressions:"
"""Before a selector: a string compared with a number or a boolean is read as one (what
ActiveMQ's STOMP puts before every subscription's selector, its headers being strings)."""

_JAVA_INTEGER: Final = re.compile(r"[+-]?\d+")
_JAVA_DOUBLE: Final = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[fFdD]?"
)


def _from_string(text: str, like: Value) -> Value:
    """A string read as the type of the value it is compared with, as Java's valueOf of that
    type reads it (a literal within 32 bits is an Integer); None when it cannot be."""
    if isinstance(like, bool):
        return text.lower() == "true"
    if isinstance(like, int):
        if _JAVA_INTEGER.fullmatch(text) is None:
            return None
        bound = 2**31 if -(2**31) <= like < 2**31 else 2**63
        n = int(text)
        return n if -bound <= n < bound else None
    if isinstance(like, float):
        text = text.strip()
        if _JAVA_DOUBLE.fullmatch(text) is None:
            return None
        return float(text.rstrip("fFdD").replace("Infinity", "inf"))
    return None


def _converted(a: Value, b: Value) -> tuple[Value, Value] | None:
    """Two values of different types made comparable by reading the string one as the
    other's type; None when neither is a string or the string does not read."""
    if isinstance(a, str) and not isinstance(b, str | bytes):
        a = _from_string(a, b)
    elif isinstance(b, str) and not isinstance(a, str | bytes):
        b = _from_string(b, a)
    else:
        return None
    if a is None or b is None or not _comparable(a, b):
        return None
    return a, b


def _compare(op: str, left: Node, right: Node, convert: bool = False) -> Node:
    if op in _EQUALITY:
        return _equal(left, right, convert, negated=op != "=")
    test = _ORDER[op]

    def node(get: Lookup) -> Value:
        a, b = left(get), right(get)
        if a is None or b is None:
            return None
        if not _comparable(a, b):
            pair = _converted(a, b) if convert else None
            if pair is None:
                return False
            a, b = pair
        return test(a, b)

    return node


def _equal(left: Node, right: Node, convert: bool, negated: bool) -> Node:
    """``=``, and ``<>`` as NOT of it (so values of types that cannot be compared are
    unequal: TRUE), as ActiveMQ has them: an absent left side is UNKNOWN, an absent right
    side (with the left present) FALSE, and two absent sides are equal."""

    def node(get: Lookup) -> Value:
        a, b = left(get), right(get)
        if a is None or b is None:
            if a is None and b is not None:
                return None
            equal = a is None and b is None
        elif _comparable(a, b):
            equal = a == b
        else:
            pair = _converted(a, b) if convert else None
            equal = pair is not None and pair[0] == pair[1]
        return equal != negated

    return node


def _divide(a: int | float, b: int | float) -> int | float | None:
    if b == 0:
        return None
    if isinstance(a, int) and isinstance(b, int):
        quotient = abs(a) // abs(b)  # Java's long division truncates toward zero
        return quotient if (a >= 0) == (b >= 0) else -quotient
    return a / b


_ARITH: Final[dict[str, Callable[[int | float, int | float], int | float | None]]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _divide,
}


def _arith(op: str, left: Node, right: Node) -> Node:
    fn = _ARITH[op]

    def node(get: Lookup) -> Value:
        a, b = left(get), right(get)
        if not (_is_number(a) and _is_number(b)):
            return None
        return fn(a, b)  # type: ignore[arg-type]

    return node


def _negate(inner: Node) -> Node:
    def node(get: Lookup) -> Value:
        v = inner(get)
        return -v if _is_number(v) else None  # type: ignore[operator]

    return node


def _like_regex(pattern: str, escape: str | None) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if escape is not None and ch == escape and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.compile("".join(out), re.DOTALL)


# -- the parser ----------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str, convert: bool = False) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0
        self.convert = convert

    @property
    def tok(self) -> _Token:
        return self.tokens[self.i]

    def take(self, kind: str) -> _Token | None:
        if self.tok.kind == kind:
            self.i += 1
            return self.tokens[self.i - 1]
        return None

    def expect(self, kind: str, what: str) -> _Token:
        token = self.take(kind)
        if token is None:
            self.fail(f"expected {what}")
        assert token is not None
        return token

    def fail(self, message: str) -> None:
        found = self.tok.text or "end of selector"
        raise InvalidSelectorError(
            self.text, f"{message} at position {self.tok.pos}, found {found!r}"
        )

    def parse(self) -> Node:
        node = self.or_expr()
        if self.tok.kind != "end":
            self.fail("unexpected token")
        return node

    def or_expr(self) -> Node:
        node = self.and_expr()
        while self.take("OR"):
            node = _or(node, self.and_expr())
        return node

    def and_expr(self) -> Node:
        node = self.not_expr()
        while self.take("AND"):
            node = _and(node, self.not_expr())
        return node

    def not_expr(self) -> Node:
        if self.take("NOT"):
            return _not(self.not_expr())
        return self.predicate()

    def predicate(self) -> Node:
        left = self.sum()
        kind = self.tok.kind
        if kind in _ORDER or kind in _EQUALITY:
            self.i += 1
            return _compare(kind, left, self.sum(), self.convert)
        if kind == "IS":
            self.i += 1
            negated = self.take("NOT") is not None
            self.expect("NULL", "NULL after IS")
            is_null: Node = lambda get: left(get) is None  # noqa: E731
            return _not(is_null) if negated else is_null
        negated = self.take("NOT") is not None
        if self.take("BETWEEN"):
            low = self.sum()
            self.expect("AND", "AND in BETWEEN")
            high = self.sum()
            node = _and(
                _compare(">=", left, low, self.convert), _compare("<=", left, high, self.convert)
            )
        elif self.take("IN"):
            node = self.in_list(left)
        elif self.take("LIKE"):
            node = self.like(left)
        else:
            if negated:
                self.fail("expected BETWEEN, IN or LIKE after NOT")
            return left
        return _not(node) if negated else node

    def in_list(self, left: Node) -> Node:
        self.expect("(", "( after IN")
        values = {self.string_literal("IN")}
        while self.take(","):
            values.add(self.string_literal("IN"))
        self.expect(")", ") closing the IN list")
        choices = frozenset(values)

        def node(get: Lookup) -> Value:
            v = left(get)
            if v is None:
                return None
            return isinstance(v, str) and v in choices

        return node

    def like(self, left: Node) -> Node:
        pattern = self.string_literal("LIKE")
        escape = None
        if self.take("ESCAPE"):
            escape = self.string_literal("ESCAPE")
            if len(escape) != 1:
                self.fail("ESCAPE needs a single character")
        regex = _like_regex(pattern, escape)

        def node(get: Lookup) -> Value:
            v = left(get)
            if v is None:
                return None
            return isinstance(v, str) and regex.fullmatch(v) is not None

        return node

    def string_literal(self, where: str) -> str:
        token = self.tok
        if token.kind != "literal" or not isinstance(token.value, str):
            self.fail(f"expected a string literal in {where}")
        self.i += 1
        assert isinstance(token.value, str)
        return token.value

    def sum(self) -> Node:
        return self._arith_level(("+", "-"), self.product)

    def product(self) -> Node:
        return self._arith_level(("*", "/"), self.unary)

    def _arith_level(self, ops: tuple[str, str], operand: Callable[[], Node]) -> Node:
        node = operand()
        while self.tok.kind in ops:
            op = self.tok.kind
            self.i += 1
            node = _arith(op, node, operand())
        return node

    def unary(self) -> Node:
        if self.take("-"):
            return _negate(self.unary())
        if self.take("+"):
            return self.unary()
        return self.primary()

    def primary(self) -> Node:
        token = self.tok
        if token.kind == "literal":
            self.i += 1
            value = token.value
            return lambda get: value
        if token.kind == "NULL":
            self.i += 1
            return lambda get: None
        if token.kind == "ident":
            self.i += 1
            name = token.text
            return lambda get: get(name)
        if self.take("("):
            node = self.or_expr()
            self.expect(")", "a closing parenthesis")
            return node
        self.fail("expected a value, an identifier or (")
        raise AssertionError("unreachable")


class Selector:
    """A compiled selector. ``matches`` is safe to call with any lookup."""

    __slots__ = ("_node", "text")

    def __init__(self, text: str, node: Node) -> None:
        self.text = text
        self._node = node

    def matches(self, lookup: Lookup) -> bool:
        try:
            return self._node(lookup) is True
        except (TypeError, ValueError, OverflowError, ArithmeticError):
            # A value of a type no rule expects (say, bytes in arithmetic): not a match.
            return False

    def __repr__(self) -> str:
        return f"Selector({self.text!r})"


@lru_cache(maxsize=1024)
def compile_selector(text: str) -> Selector:
    """Parse a selector; raises InvalidSelectorError naming the problem and position."""
    convert = text.startswith(CONVERT_STRINGS_PREFIX)
    expression = text[len(CONVERT_STRINGS_PREFIX) :] if convert else text
    if not expression.strip():
        raise InvalidSelectorError(text, "empty selector")
    return Selector(text, _Parser(expression, convert).parse())
