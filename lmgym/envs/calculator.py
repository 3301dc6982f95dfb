"""A safe calculator for reasoning steps (used by the stepwise math env).

Expressions come from model output, so they are never evaluated as code: the
text is checked against a character whitelist, re-emitted from whitelisted
tokens, parsed with ``ast.parse`` (after length/nesting limits) and walked by
the whitelisted sympy builder of :mod:`lmgym.envs.safe_arith` in numeric-only mode
(numbers, ``+ - * / **``, parentheses; no names).  Arithmetic is exact
(decimals become rationals).  The builder's size guards (exponent magnitude,
~1000-digit intermediates) bound the cost of every single operation, and the
``timeout`` is a deadline checked between AST nodes, so ``9**9**9`` and
friends return None immediately.
"""

from __future__ import annotations

import re
import time
from decimal import ROUND_HALF_EVEN, Decimal, localcontext

import sympy

from lmgym.envs.safe_arith import MAX_NESTING, max_nesting, parse_source, tokens_to_source

__all__ = ["safe_calculate", "find_calculation", "apply_calculator"]

MAX_CALC_CHARS = 200
MAX_EXACT_DECIMALS = 12  # terminating decimals longer than this are rounded
ROUND_DECIMALS = 6

_CALC_CHARS_RE = re.compile(r"[0-9+\-*/(). ]+")
_THOUSANDS_RE = re.compile(r"(?<=[0-9]),(?=[0-9]{3}(?![0-9]))")
# Characters allowed in a calculation request inside a reasoning step.
_REQUEST_CHARS = frozenset("0123456789 +-*/().^x×,")
_ANNOTATION_RE = re.compile(r"<<([0-9 +\-*/().^x×,]+)=\s*")
# A comma that is not a thousands separator ("3, 4 + 5 =") ends the text before the request.
_LIST_COMMA_RE = re.compile(r"(?<![0-9]),|,(?![0-9]{3}(?![0-9]))")


def _format(value: sympy.Expr) -> str | None:
    """Plain decimal string: exact when short, else rounded to 6 decimals."""
    with localcontext() as ctx:
        ctx.prec = 1100
        if value.is_Rational:
            p, q = int(value.p), int(value.q)
            if q == 1:
                return str(p)
            rest, places = q, 0
            for f in (2, 5):
                k = 0
                while rest % f == 0:
                    rest //= f
                    k += 1
                places = max(places, k)
            exact = Decimal(p) / Decimal(q)
            if rest == 1 and places <= MAX_EXACT_DECIMALS:
                return format(exact, "f")
        elif value.is_real:
            exact = Decimal(str(value.evalf(40)))
        else:
            return None  # complex, e.g. (-1)**0.5
        rounded = exact.quantize(Decimal(1).scaleb(-ROUND_DECIMALS), rounding=ROUND_HALF_EVEN)
        if rounded == 0 and exact != 0:  # tiny values keep 6 significant digits
            step = Decimal(1).scaleb(exact.adjusted() - 5)
            rounded = exact.quantize(step, rounding=ROUND_HALF_EVEN)
        text = format(rounded, "f")
        if "." in text:
            text = text.rstrip("0").rstrip(".")
        return "0" if text == "-0" else text


def safe_calculate(expression: str, timeout: float = 0.5) -> str | None:
    """Evaluate ``+ - * / **`` (``^``, ``x``, ``×`` accepted) exactly; None if invalid.

    Integers come back as ``"24"``, terminating fractions as ``"2.5"``, other
    values rounded to 6 decimals (``"0.333333"``).  Never raises.
    """
    try:
        deadline = time.monotonic() + max(float(timeout), 0.0)
        if not isinstance(expression, str) or len(expression) > MAX_CALC_CHARS:
            return None
        expr = expression.strip()
        for old, new in (("×", "*"), ("x", "*"), ("X", "*"), ("÷", "/"), ("−", "-")):
            expr = expr.replace(old, new)
        expr = _THOUSANDS_RE.sub("", expr.replace("^", "**"))
        if not expr or not _CALC_CHARS_RE.fullmatch(expr) or max_nesting(expr) > MAX_NESTING:
            return None
        source = tokens_to_source(expr, implicit_mul=False)
        value = parse_source(source, symbolic=False, deadline=deadline)
        if value is None or time.monotonic() > deadline:
            return None
        return _format(value)
    except Exception:  # noqa: BLE001 - never raise on untrusted input
        return None


def _trailing_request(step: str) -> str | None:
    """Arithmetic expression right before a trailing ``=`` (linear scan)."""
    body = step.rstrip()
    if not body.endswith("=") or body.endswith("=="):
        return None
    end = len(body) - 1
    start = end
    while start > 0 and body[start - 1] in _REQUEST_CHARS:
        start -= 1
        if end - start > MAX_CALC_CHARS:
            return None  # too long to compute; never complete just a suffix
    expr = body[start:end]
    list_commas = list(_LIST_COMMA_RE.finditer(expr))
    last_list_comma = list_commas[-1] if list_commas else None
    if last_list_comma is not None:  # "so 3, 4 + 5 =" -> "4 + 5"; "1,500 + 200 =" stays whole
        expr = expr[last_list_comma.end() :]
    if ". " in expr:  # "... is 3. 4 * 5 =" -> "4 * 5"
        expr = expr.rsplit(". ", 1)[1]
    expr = expr.lstrip(" x×*/^)+").strip()
    while expr.startswith("(") and expr.count("(") > expr.count(")"):
        expr = expr[1:].lstrip()  # "(so 3 + 4 =" -> "3 + 4"
    return expr or None


def _is_request(expr: str) -> bool:
    """A digit and at least one operator between operands."""
    return any(c.isdigit() for c in expr) and any(c in "+-*/^x×" for c in expr.lstrip("-"))


def _open_annotation(step: str) -> int | None:
    """Where the last line's unclosed GSM8K annotation ``<<`` starts, or None."""
    open_at = step.rfind("<<")
    if open_at < 0 or step.rfind(">>") > open_at or step.find("\n", open_at) >= 0:
        return None
    return open_at


def find_calculation(step: str) -> tuple[str, int] | None:
    """Find an arithmetic request at the end of ``step``.

    Either an open GSM8K annotation ``<<48/2=`` or a trailing ``48 / 2 =``.
    Returns (expression, index where the result goes == len(step)) or None.
    """
    if not isinstance(step, str):
        return None
    open_at = _open_annotation(step)
    if open_at is not None:
        m = _ANNOTATION_RE.fullmatch(step, open_at)
        if m and _is_request(m.group(1)):
            return m.group(1).strip(), len(step)
        return None
    expr = _trailing_request(step)
    if expr is None or not _is_request(expr):
        return None
    return expr, len(step)


def apply_calculator(step: str) -> tuple[str, str]:
    """Return (step, injected_text) completing a calculation request in ``step``.

    ``"<<48/2="`` -> ``"24>>"``; ``"... 48 / 2 ="`` -> ``" 24"`` (no leading
    space if the step already ends in whitespace); ``""`` if there is no
    request or it cannot be computed.
    """
    found = find_calculation(step)
    if found is None:
        return step, ""
    expr, _ = found
    result = safe_calculate(expr)
    if result is None:
        return step, ""
    if _open_annotation(step) is not None:
        return step, result + ">>"
    return step, ("" if step[-1:].isspace() else " ") + result
