"""Plain written-out numbers (``12``, ``-0.5``, ``2e5``, ``3/4``, ``\\frac{3}{4}``, ``918\\frac{1}{2}``, ``50%``).

Parsed with one anchored regex and :class:`fractions.Fraction` (no sympy, no eval) and compared
in-process: microseconds per call, so GSM8K-style golds never reach the worker process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction

REL_TOL = Fraction(1, 10**6)  # only for inexact golds, see compare_numbers
MAX_EXPONENT_DIGITS = 3  # 1e999 at most: 1e1000000 is not a plain number
MAX_LITERAL_CHARS = 400
MIN_ROUNDED_DIGITS = (4, 3)  # significant digits of a rounded prediction, of a rounded gold (see compare_numbers)

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
    """Value of a written-out number; ``exact`` is False for decimals with a fractional part.

    ``places`` and ``significant``: the digits after the point and the significant digits of a plain decimal
    (``0.3333``: 4 and 4; ``3.14``: 2 and 3); ``places`` is 0 for anything else (``7``, ``1/3``, ``2e5``).
    """

    value: Fraction
    exact: bool
    percent: bool
    places: int = field(default=0, compare=False)
    significant: int = field(default=0, compare=False)


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
    places = significant = 0
    if m["exp"] is None and m["den"] is None and "." in m["num"]:
        whole, fraction = m["num"].split(".")
        places, significant = len(fraction), len((whole + fraction).lstrip("0"))
    return PlainNumber(sign * value, exact, m["pct"] == "%", places, significant)


def is_number_literal(answer: str) -> bool:
    """True for a written-out number: 12, -0.5, 2e5, 3/4, \\frac{3}{4}, 3\\frac{1}{2}, 50% (after normalize_answer)."""
    return parse_number(answer) is not None or bool(
        isinstance(answer, str) and len(answer) <= MAX_LITERAL_CHARS and _LITERAL_RE.fullmatch(_strip_parens(answer))
    )


def _rounds_to(value: Fraction, decimal: Fraction, places: int) -> bool:
    """Is ``decimal`` the value rounded to ``places`` digits after the point (half a last digit either way)?"""
    return abs(value - decimal) <= Fraction(5, 10 ** (places + 1))


def _is_rounding(predicted: PlainNumber, gold: PlainNumber, p: Fraction, g: Fraction) -> bool:
    """One side is the other rounded (see ``compare_numbers``; the digit counts are ``MIN_ROUNDED_DIGITS``)."""
    if predicted.places and predicted.significant >= MIN_ROUNDED_DIGITS[0] and not gold.places:
        return _rounds_to(g, p, predicted.places)
    finer = not predicted.places or predicted.places >= gold.places + 2
    if gold.places and gold.significant >= MIN_ROUNDED_DIGITS[1] and finer:
        return _rounds_to(p, g, gold.places)
    return False


def _close(a: Fraction, b: Fraction, tolerant: bool) -> bool:
    if a == b:
        return True
    return tolerant and abs(a - b) <= REL_TOL * max(abs(a), abs(b))


def compare_numbers(predicted: PlainNumber, gold: PlainNumber) -> bool:
    """Exact comparison; relative tolerance ``REL_TOL`` only when the gold is an inexact decimal; and rounding.

    Rounding: a prediction that is the gold correctly rounded to its own decimal places, with at least four
    significant digits (0.3333 == 1/3, 0.33 != 1/3, 0.5000001 != 1/2), or a gold decimal with at least three
    significant digits that is the prediction rounded, where the prediction is exact or two places finer
    (1/3 == 0.333, 3.14159 == 3.14; 3.144 != 3.14); both as written, not across a percent sign.  Percent:
    when exactly one side has ``%``, "50%" matches both 50 and 0.5.
    """
    tolerant = not gold.exact
    pairs = [(predicted.value, gold.value)]
    if predicted.percent != gold.percent:
        pairs.append((predicted.value / 100, gold.value) if predicted.percent else (predicted.value, gold.value / 100))
    return any(_close(a, b, tolerant) for a, b in pairs) or _is_rounding(predicted, gold, *pairs[0])
