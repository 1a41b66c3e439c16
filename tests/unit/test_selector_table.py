"""The selector engine over tables of expressions (compatibility C8): operators, three-valued NULL
logic, LIKE/ESCAPE, IN, BETWEEN, arithmetic and type mismatches, and parse errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dovecote.core.errors import InvalidSelectorError
from dovecote.core.selector import compile_selector

PROPS: dict[str, object] = {
    "s": "abc",
    "n": 5,
    "f": 2.5,
    "t": True,
    "fa": False,
    "neg": -3,
    "zero": 0,
    "pct": "100%",
    "under": "a_b",
    "JMSPriority": 7,
    "JMSType": "order",
    "quote": "it's",
}


def matches(selector: str, props: dict[str, object] = PROPS) -> bool:
    return compile_selector(selector).matches(props.get)  # type: ignore[arg-type]


CASES = [
    # comparison
    ("n = 5", True),
    ("n <> 5", False),
    ("n != 4", True),
    ("n > 4 AND n >= 5 AND n < 6 AND n <= 5", True),
    ("f = 2.5", True),
    ("n > f", True),
    ("n = 5.0", True),
    ("s = 'abc'", True),
    ("s <> 'abd'", True),
    ("s < 'abd'", True),
    ("t = TRUE", True),
    ("fa = false", True),
    ("quote = 'it''s'", True),
    ("JMSPriority > 6 AND JMSType = 'order'", True),
    # bare booleans as conditions
    ("t", True),
    ("NOT t", False),
    ("fa OR t", True),
    ("s", False),
    # arithmetic and precedence
    ("n + 1 = 6", True),
    ("n - 2 * 2 = 1", True),
    ("(n - 2) * 2 = 6", True),
    ("n / 2 = 2", True),  # integer division truncates
    ("neg / 2 = -1", True),  # toward zero, as Java
    ("f * 2 = 5", True),
    ("-n = neg - 2", True),
    ("- -n = 5", True),
    ("+n = 5", True),
    ("n / zero = 1", False),  # division by zero is UNKNOWN
    ("NOT (n / zero = 1)", False),
    ("0x10 = 16", True),
    ("010 = 8", True),
    ("5L = n", True),
    ("1e1 = 10", True),
    (".5 * 10 = n", True),
    # type mismatches are false, not errors (ActiveMQ)
    ("s = 5", False),
    ("s > 1", False),
    ("NOT (s = 5)", True),
    ("s <> 5", True),  # <> is NOT of =: values that cannot be compared are unequal
    ("t <> 1", True),
    ("1 = missing", False),  # an absent right side is FALSE, an absent left one UNKNOWN
    ("NOT (1 = missing)", True),
    ("missing <> 1", False),
    ("missing = nothing", True),  # two absent sides are equal (ActiveMQ's EqualsExpression)
    ("t = 1", False),
    ("s + 1 = 2", False),
    # NULL: three-valued logic
    ("missing = 1", False),
    ("NOT (missing = 1)", False),
    ("missing IS NULL", True),
    ("missing IS NOT NULL", False),
    ("s IS NOT NULL", True),
    ("missing = 1 OR t", True),
    ("missing = 1 OR fa", False),
    ("missing = 1 AND fa", False),
    ("NOT (missing = 1 AND fa)", True),
    ("missing = 1 AND t", False),
    ("NOT (missing = 1 AND t)", False),
    ("NOT (missing = 1 OR fa)", False),
    ("missing + 1 = 1", False),
    # LIKE
    ("s LIKE 'a%'", True),
    ("s LIKE '_b_'", True),
    ("s LIKE 'a_'", False),
    ("s NOT LIKE 'x%'", True),
    ("pct LIKE '100\\%' ESCAPE '\\'", True),
    ("s LIKE 'ab\\%' ESCAPE '\\'", False),
    ("under LIKE 'a!_b' ESCAPE '!'", True),
    ("s LIKE 'a!_c' ESCAPE '!'", False),
    ("missing LIKE 'a%'", False),
    ("missing NOT LIKE 'a%'", False),
    ("n LIKE '5'", False),
    # IN
    ("s IN ('x', 'abc')", True),
    ("s IN ('x')", False),
    ("s NOT IN ('x', 'y')", True),
    ("missing IN ('x')", False),
    ("missing NOT IN ('x')", False),
    # BETWEEN
    ("n BETWEEN 1 AND 5", True),
    ("n BETWEEN 6 AND 9", False),
    ("n NOT BETWEEN 6 AND 9", True),
    ("f BETWEEN 2 AND 3", True),
    ("missing BETWEEN 1 AND 2", False),
    ("missing NOT BETWEEN 1 AND 2", False),
    ("s BETWEEN 1 AND 2", False),
    # keywords are case-insensitive, identifiers are not
    ("n between 1 and 5 and s like 'a%' or fa", True),
    ("N = 5", False),
    ("S IS NULL", True),
]


@pytest.mark.parametrize(("selector", "expected"), CASES)
def test_selector_table(selector: str, expected: bool) -> None:
    assert matches(selector) is expected


INVALID = [
    "",
    "   ",
    "n =",
    "= 5",
    "(n = 5",
    "n = 5)",
    "n = 5 5",
    "s = 'unterminated",
    "s LIKE 5",
    "s LIKE 'a' ESCAPE 'ab'",
    "s IN ()",
    "s IN (1, 2)",
    "n BETWEEN 1",
    "n IS 5",
    "n NOT 5",
    "AND = 1",
    "n = 5 AND",
    "n # 5",
    "09 = 9",
]


@pytest.mark.parametrize("selector", INVALID)
def test_invalid_selectors_raise_naming_the_problem(selector: str) -> None:
    with pytest.raises(InvalidSelectorError) as info:
        compile_selector(selector)
    assert info.value.reason


def test_headers_come_from_the_lookup_like_properties() -> None:
    seen: list[str] = []

    def lookup(name: str) -> object:
        seen.append(name)
        return {"JMSDeliveryMode": "PERSISTENT"}.get(name)

    assert compile_selector("JMSDeliveryMode = 'PERSISTENT'").matches(lookup)  # type: ignore[arg-type]
    assert seen == ["JMSDeliveryMode"]


STRINGS = {"ns": "5", "nf": "2.5", "nb": "true", "big": "3000000000", "nx": "5x", "s": "abc"}
CONVERTED = [  # (selector, with the prefix, without it)
    ("ns > 1", True, False),
    ("ns = 5", True, False),
    ("ns <> 5", False, True),
    ("ns BETWEEN 1 AND 9", True, False),
    ("ns = 5.0", True, False),  # read as a double
    ("nf > 2.0", True, False),
    ("nf > 2", False, False),  # "2.5" is no Integer
    ("nb = TRUE", True, False),
    ("nx > 1", False, False),
    ("nx <> 1", True, True),
    ("big > 1", False, False),  # past an Integer's range, as the literal 1 is one
    ("big >= 3000000000", True, False),  # a Long literal reads it as a Long
    ("s = 'abc'", True, True),  # strings with strings as ever
    ("5 < ns + 1", False, False),  # arithmetic does not convert
]


@pytest.mark.parametrize(("selector", "converted", "plain"), CONVERTED)
def test_strings_read_as_numbers_behind_the_stomp_prefix(
    selector: str, converted: bool, plain: bool
) -> None:
    """What ActiveMQ's STOMP does: every header is a string, and its SUBSCRIBE puts
    ``convert_string_expressions:`` before the selector; without it a string is no number."""
    with_prefix = compile_selector("convert_string_expressions:" + selector)
    assert with_prefix.matches(STRINGS.get) is converted
    assert compile_selector(selector).matches(STRINGS.get) is plain


def test_booleans_are_not_numbers() -> None:
    assert not matches("t = 1")
    assert not matches("t + 1 = 2")


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("nsft ()'=<>!+-*/.,%_0123456789AaNnDdOoRrLlIiKkEe\\")),
        max_size=40,
    )
)
def test_any_text_compiles_or_raises_invalid_selector(text: str) -> None:
    try:
        selector = compile_selector(text)
    except InvalidSelectorError:
        return
    assert isinstance(selector.matches(PROPS.get), bool)  # type: ignore[arg-type]


values = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=5),
    st.binary(max_size=5),
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([c[0] for c in CASES]),
    st.dictionaries(st.sampled_from(["s", "n", "f", "t", "fa", "missing", "zero"]), values),
)
def test_matches_never_raises_whatever_the_values(selector: str, props: dict[str, object]) -> None:
    assert isinstance(matches(selector, props), bool)
