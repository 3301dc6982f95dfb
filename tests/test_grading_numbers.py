"""lmgym.envs.grading.numbers: parsing written-out numbers exactly and comparing them in-process."""

from __future__ import annotations

from fractions import Fraction

import pytest

from lmgym.envs.grading.numbers import (
    MAX_LITERAL_CHARS,
    REL_TOL,
    PlainNumber,
    compare_numbers,
    is_number_literal,
    parse_number,
)


@pytest.mark.parametrize(
    ("text", "value", "exact", "percent"),
    [
        ("12", Fraction(12), True, False),
        ("-0.5", Fraction(-1, 2), False, False),
        ("+3.0", Fraction(3), True, False),  # a zero fractional part is still exact
        ("2e5", Fraction(200_000), True, False),
        ("3/4", Fraction(3, 4), True, False),
        ("\\frac{3}{4}", Fraction(3, 4), True, False),
        ("\\frac34", Fraction(3, 4), True, False),
        ("-\\frac{-1}{2}", Fraction(1, 2), True, False),
        ("918\\frac{1}{2}", Fraction(1837, 2), True, False),
        ("50%", Fraction(50), True, True),
        ("((7))", Fraction(7), True, False),
        (".25", Fraction(1, 4), False, False),
    ],
)
def test_parse_number_reads_plain_numbers_exactly(text, value, exact, percent):
    assert parse_number(text) == PlainNumber(value, exact, percent)
    assert is_number_literal(text)


@pytest.mark.parametrize(
    "text",
    ["x", "1+1", "1e1000", "١٢", "12 apples", "", "1" * (MAX_LITERAL_CHARS + 1), None],
)
def test_parse_number_refuses_everything_else(text):
    assert parse_number(text) is None and not is_number_literal(text)


@pytest.mark.parametrize("text", ["1/0", "\\frac{1}{0}", "2\\frac{3}{2}", "2\\frac{-1}{2}"])
def test_a_zero_denominator_or_a_false_mixed_number_is_a_literal_without_a_value(text):
    assert parse_number(text) is None and is_number_literal(text)


def number(text: str) -> PlainNumber:
    parsed = parse_number(text)
    assert parsed is not None
    return parsed


@pytest.mark.parametrize(
    ("predicted", "gold", "equal"),
    [
        ("1000001", "1000000", False),  # exact golds compare exactly
        ("0.5", "1/2", True),
        ("0.333333", "1/3", True),  # 1/3 rounded to the six places written
        ("0.333334", "1/3", False),  # not a rounding of 1/3
        ("0.333", "1/3", False),  # three significant digits: too few for a rounded prediction
        ("1/3", "0.333", True),  # a gold of three significant digits rounds an exact prediction
        ("0.33", "0.3", False),
        ("3.14159", "3.14", True),  # two places finer
        ("3.141", "3.14", False),  # one place finer: a different claim
        ("1/3", "0.333333", True),  # an inexact gold allows REL_TOL
        ("0.3333", "0.333333", False),
        ("50%", "0.5", True),  # one side with %: both readings
        ("50%", "50", True),
        ("0.5", "50%", True),
        ("50%", "0.5%", False),  # both with %: compared as written
        ("-2", "2", False),
    ],
)
def test_compare_numbers(predicted, gold, equal):
    assert compare_numbers(number(predicted), number(gold)) is equal


def test_the_tolerance_is_relative_and_only_for_inexact_golds():
    gold = PlainNumber(Fraction(1), exact=False, percent=False)
    assert compare_numbers(PlainNumber(1 + REL_TOL, True, False), gold)
    assert not compare_numbers(PlainNumber(1 + 2 * REL_TOL, True, False), gold)
    assert not compare_numbers(PlainNumber(1 + REL_TOL, True, False), PlainNumber(Fraction(1), True, False))
