"""lmgym.envs.safe_arith: the whitelisted tokenizer, the sympy builder's size guards, and the nesting helpers."""

from __future__ import annotations

import pytest
import sympy

from lmgym.envs.safe_arith import (
    MAX_BITS,
    MAX_EXPONENT,
    MAX_NESTING,
    closing_brace,
    max_nesting,
    parse_source,
    tokens_to_source,
)
from tests.cpu_timing import cpu_call


@pytest.mark.parametrize(("text", "depth"), [("", 0), ("1+2", 0), ("(1)", 1), ("((a)[b]{c})", 2), ("(" * 60, 60),
                                             (")(", 0)])  # unbalanced: never below 0 deep
def test_max_nesting_counts_the_deepest_bracket(text, depth):
    assert max_nesting(text) == depth


@pytest.mark.parametrize(("text", "start", "end"), [("\\frac{a}{b}", 5, 7), ("{a{b}c}", 0, 6), ("{a{b}", 0, -1),
                                                    ("x{}", 1, 2)])
def test_closing_brace_finds_the_matching_brace(text, start, end):
    assert closing_brace(text, start) == end


@pytest.mark.parametrize(
    ("text", "implicit", "source"),
    [("3^2", False, "3 ** 2"), ("  12 /4 ", False, "12 / 4"), ("2x", True, "2 * x"), ("2(x+1)", True, "2 * ( x + 1 )"),
     ("2x", False, "2 x"), ("007", False, "7")],
)
def test_tokens_to_source_re_emits_whitelisted_tokens(text, implicit, source):
    assert tokens_to_source(text, implicit_mul=implicit) == source


@pytest.mark.parametrize("text", ["__import__('os')", "().__class__", "1; 2", "a[0]", "x = 1", "lambda: 1"])
def test_tokens_to_source_rejects_anything_else(text):
    with pytest.raises(ValueError, match="^unexpected character"):
        tokens_to_source(text, implicit_mul=False)


@pytest.mark.parametrize(
    ("source", "value"),
    [("3 ** 2", 9), ("0.1 + 0.2", sympy.Rational(3, 10)), ("7 / 2", sympy.Rational(7, 2)), ("- 4 + + 1", -3),
     ("2 ** -2", sympy.Rational(1, 4)), ("1e3", 1000)],
)
def test_parse_source_is_exact(source, value):
    assert parse_source(source, symbolic=False) == value


@pytest.mark.parametrize(
    "source",
    [
        f"2 ** {MAX_EXPONENT + 1}",  # exponent over the bound
        "9 ** 9 ** 9",  # a power tower
        " * ".join([f"10 ** {MAX_EXPONENT}"] * (MAX_BITS // 300)),  # an intermediate over MAX_BITS
        "1 / 0",
        "x + 1",  # names only in symbolic mode
        "f(1)",  # no calls but sqrt
        "1 if 1 else 2",
        "(" * (MAX_NESTING + 11) + "1" + ")" * (MAX_NESTING + 11),
    ],
)
def test_parse_source_rejects_unsafe_or_huge_expressions_quickly(source):
    value, seconds = cpu_call(parse_source, source, symbolic=False)
    assert value is None and seconds < 2.0


def test_symbolic_mode_builds_symbols_and_a_deadline_stops_the_walk():
    assert parse_source("x + 1", symbolic=True) == sympy.Symbol("x") + 1
    assert parse_source("sqrt(4) + pi", symbolic=False) == 2 + sympy.pi
    assert parse_source("1 + 1", symbolic=False, deadline=0.0) is None  # the deadline has passed
