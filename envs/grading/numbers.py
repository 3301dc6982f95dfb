"""Plain written-out numbers (``12``, ``-0.5``, ``2e5``, ``3/4``, ``\\frac{3}{4}``, ``918\\frac{1}{2}``, ``50%``).

Parsed with one anchored regex and :class:`fractions.Fraction` (no sympy, no eval) and compared
in-process: microseconds per call, so GSM8K-style golds never reach the worker process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

REL_TOL = Fraction(1, 10**6)  # only for inexact golds, see compare_numbers
MAX_EXPONENT_DIGITS = 3  # 1e999 at most: 1e1000000 is not a plain number
MAX_LITERAL_CHARS = 400

_NUM = r"(?:\d+(?:\.\d*)?|\.\d+)"
_LITERAL_RE = re.compile(  # ASCII digits only
    r"(?<![\d.])(?P<sign>[-+]?)(?:"
    r"(?P<whole>\d+)?\\frac(?:\{(?P<fn>[-+]?\d+)\}|(?P<fn1>\d))(?:\{(?P<fd>\d+)\}|(?P<fd1>\d))"
    rf"|(?P<num>{_NUM})(?:[eE](?P<exp>[-+]?\d{{1,{MAX_EXPONENT_DIGITS}}}))?(?:/(?P<den>{_NUM}))?"
    r")(?P<pct>%?)",
    re.ASCII,
)


@dataclass(frozen=True)
class PlainNumber:
    """Value of a written-out number; ``exact`` is False for decimals with a fractional part."""

    value: Fraction
    exact: bool
    percent: bool


def _strip_parens(s: str) -> str:
    while len(s) >= 2 and s[0] == "(" and s[-1] == ")":
        s = s[1:-1]
    return s


def parse_number(answer: str) -> PlainNumber | None:
    """The value of a normalised answer that is a plain number, else None (never raises)."""
    if not isinstance(answer, str) or len(answer) > MAX_LITERAL_CHARS:
        return None
    m = _LITERAL_RE.fullmatch(_strip_parens(answer))
    if m is None:
        return None
    sign = -1 if m["sign"] == "-" else 1
    if m["num"] is None:  # \frac, possibly a mixed number 918\frac{1}{2}
        num, den = int(m["fn"] or m["fn1"]), int(m["fd"] or m["fd1"])
        if den == 0:
            return None
        value = Fraction(num, den)
        if m["whole"] is not None:
            if not 0 <= num < den:  # 2\frac{3}{2} or 2\frac{-1}{2} is no mixed number
                return None
            value += int(m["whole"])
        return PlainNumber(sign * value, True, m["pct"] == "%")
    exact = "." not in m["num"].rstrip("0").rstrip(".") and "." not in (m["den"] or "").rstrip("0").rstrip(".")
    value = Fraction(m["num"])
    if m["exp"] is not None:
        value *= Fraction(10) ** int(m["exp"])
    if m["den"] is not None:
        den = Fraction(m["den"])
        if den == 0:
            return None
        value /= den
    return PlainNumber(sign * value, exact, m["pct"] == "%")


def is_number_literal(answer: str) -> bool:
    """True for a written-out number: 12, -0.5, 2e5, 3/4, \\frac{3}{4}, 3\\frac{1}{2}, 50% (after normalize_answer)."""
    return parse_number(answer) is not None or bool(
        isinstance(answer, str) and len(answer) <= MAX_LITERAL_CHARS and _LITERAL_RE.fullmatch(_strip_parens(answer))
    )


def _close(a: Fraction, b: Fraction, tolerant: bool) -> bool:
    if a == b:
        return True
    return tolerant and abs(a - b) <= REL_TOL * max(abs(a), abs(b))


def compare_numbers(predicted: PlainNumber, gold: PlainNumber) -> bool:
    """Exact comparison; relative tolerance ``REL_TOL`` only when the gold is an inexact decimal.

    Percent: when exactly one side has ``%``, "50%" matches both 50 and 0.5.
    """
    tolerant = not gold.exact
    pairs = [(predicted.value, gold.value)]
    if predicted.percent != gold.percent:
        pairs.append((predicted.value / 100, gold.value) if predicted.percent else (predicted.value, gold.value / 100))
    return any(_close(a, b, tolerant) for a, b in pairs)
