"""LaTeX answers -> sympy -> equivalence.  Runs ONLY inside the CPU-bounded worker (:mod:`.worker`).

Parsing uses ``latex2sympy2_extended`` (Math-Verify's ANTLR LaTeX grammar, a core dependency, which builds sympy
objects node by node; it only calls ``parse_expr`` for ``variable_values``, never passed here, and
``sympify`` on objects it built or on lexer number tokens).  Input is capped in size and bracket
depth first (the ANTLR parser is exponential in brace depth), and the parsed tree is screened for
numbers too large to compute (power towers, huge factorials) before any evaluation, because a big
integer power runs in C where the CPU timer cannot interrupt it.

The comparison is our own rather than ``math_verify.grader.verify``: verify rounds floats to 6
decimals on both sides (it accepts 0.5000001 for 1/2 and 0.333333 for an exact 1/3) and falls back
to lenient string, case-insensitive and concatenated-symbol matches.  We need integers and exact
rationals compared exactly, tolerance only for inexact or irrational golds, and every rule visible
here.  Its structural rules (sets unordered, tuples ordered, assignments unwrapped, flipped
inequalities, relation vs interval, matrices elementwise) are followed.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import re
from typing import Any

import sympy
from sympy import Basic, Expr, FiniteSet, Interval, MatrixBase, Rational, Set, Tuple
from sympy.core.function import AppliedUndef
from sympy.core.relational import Equality, GreaterThan, LessThan, Relational, StrictGreaterThan, StrictLessThan
from sympy.logic.boolalg import And

from lmgym.envs.grading.complex_marks import marks_complex
from lmgym.envs.safe_arith import max_nesting

MAX_LATEX_CHARS = 500
MAX_LATEX_NESTING = 10  # ANTLR prediction cost grows exponentially with brace depth
MAX_NODES = 3000
MAX_ITEMS = 40  # elements of a set / tuple / matrix compared pairwise
MAX_BITS = 20_000  # ~6000 decimal digits for any number the comparison may compute
MAX_SYMBOLIC_EXP = 1000  # |n| in x**n (expanding (x+1)**n)
REL_TOL = 1e-6  # relative, only for inexact (decimal) or irrational golds

_IMAGINARY_RE = re.compile(r"(?<![A-Za-z\\])i(?![A-Za-z])")  # 2i, 3+i, (1+i)^2; not \pi, \sin, xi
_FLIP = {GreaterThan: LessThan, StrictGreaterThan: StrictLessThan}


class _TooBig(Exception):
    pass


# --------------------------------------------------------------------------
# parsing (worker only)
# --------------------------------------------------------------------------

_NORMALIZATION = None
_CONVERSION = None


def preload() -> None:
    """Import the parser and warm its ANTLR caches; run once per worker before it serves."""
    global _NORMALIZATION, _CONVERSION
    from latex2sympy2_extended.latex2sympy2 import ConversionConfig
    from latex2sympy2_extended.math_normalization import NormalizationConfig

    if importlib.util.find_spec("math_verify") is not None:  # the [math-verify] extra, for grader="math_verify"
        import math_verify  # noqa: F401

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    logging.getLogger("latex2sympy2_extended").setLevel(logging.CRITICAL)
    # units=False: its unit list strips trailing single letters ("x+3t" -> "x+3"); units are removed by
    # normalize_answer instead.  equations=False: equations are handled by the comparison.
    _NORMALIZATION = NormalizationConfig(
        basic_latex=True, units=False, malformed_operators=True, nits=True, boxed="all", equations=False
    )
    _CONVERSION = ConversionConfig()
    for sample in (r"\frac{1}{2}", r"(x+1)^2", r"\{1, 2\}", r"x \le 3", r"(-\infty, 3]", r"\sqrt{2}+\sin x"):
        parse_latex(sample)
    compare_default(("x^2+2x+1", "(x+1)^2", False, False))


def is_complex(s: str) -> bool:
    """Does the answer use complex numbers (a standalone ``i``, ``\\mathbb{C}``, ...)?"""
    return bool(_IMAGINARY_RE.search(s)) or marks_complex(s)


def parse_latex(s: str, complex_: bool = False) -> Any:
    """sympy object for a LaTeX answer, or None (too large, unparsable, or numbers too big).

    With ``complex_`` the symbol ``i`` is the imaginary unit.
    """
    if len(s) > MAX_LATEX_CHARS or max_nesting(s) > MAX_LATEX_NESTING:
        return None
    from latex2sympy2_extended.latex2sympy2 import latex2sympy

    try:
        expr = latex2sympy(
            s, is_real=not complex_, convert_degrees=False,
            normalization_config=_NORMALIZATION, conversion_config=_CONVERSION,
        )
        _screen(expr)
        if complex_ and isinstance(expr, Basic):
            expr = expr.xreplace({sym: sympy.I for sym in expr.free_symbols if sym.name == "i"})
        return expr
    except _TooBig:
        return None
    except Exception:  # noqa: BLE001 - syntax errors, RecursionError, ...
        return None


def _bits(e: Any) -> float:
    """Upper bound on log2 |value| of a numeric (symbol-free) subtree, without evaluating it."""
    if isinstance(e, sympy.Integer):
        return max(int(e.p).bit_length(), 1)
    if isinstance(e, sympy.Rational):
        return max(int(e.p).bit_length(), int(e.q).bit_length(), 1)
    if isinstance(e, sympy.Float):
        f = abs(float(e))
        return 1.0 if f == 0 else (max(abs(math.log2(f)), 1.0) if f < math.inf else MAX_BITS + 1.0)
    if isinstance(e, sympy.Pow):
        exp_bits = _bits(e.exp)
        if exp_bits > 40:
            raise _TooBig
        return _bits(e.base) * 2.0**exp_bits
    if isinstance(e, (sympy.factorial, sympy.gamma, sympy.factorial2, sympy.subfactorial)):
        arg_bits = _bits(e.args[0])
        if arg_bits > 40:
            raise _TooBig
        n = 2.0**arg_bits
        return n * max(math.log2(n), 1.0)
    if isinstance(e, sympy.binomial):
        n_bits = _bits(e.args[0])
        if n_bits > 40:
            raise _TooBig
        return 2.0**n_bits
    if not e.args:
        return 2.0  # pi, E, I, ...
    return sum(_bits(a) for a in e.args) + len(e.args)


def _screen(expr: Any) -> None:
    """Raise _TooBig for trees too large to compare within a small CPU budget."""
    items = list(expr) if isinstance(expr, MatrixBase) else [expr]
    nodes = 0
    for item in items:
        if not isinstance(item, Basic):
            continue
        for node in sympy.preorder_traversal(item):
            nodes += 1
            if nodes > MAX_NODES:
                raise _TooBig
            if isinstance(node, (sympy.Pow, sympy.factorial, sympy.gamma, sympy.factorial2, sympy.subfactorial,
                                 sympy.binomial)) and not node.free_symbols:
                if _bits(node) > MAX_BITS:
                    raise _TooBig
            elif isinstance(node, sympy.Pow) and node.exp.is_Number and abs(node.exp) > MAX_SYMBOLIC_EXP:
                raise _TooBig
            elif isinstance(node, sympy.Pow) and not node.exp.free_symbols and _bits(node.exp) > 12:
                raise _TooBig


# --------------------------------------------------------------------------
# undefined values (division by zero, 0/0, oo - oo): never equal to anything
# --------------------------------------------------------------------------


def _is_undefined_atom(e: Any) -> bool:
    return e is sympy.zoo or e is sympy.nan


def _evaluated(e: Basic) -> Basic | None:
    """``e`` re-evaluated node by node from the leaves up; None if some node becomes zoo or nan.

    The parser leaves some nodes unevaluated (``1/(1-1)``, ``x/0``, ``9/(0 a m)``, ``\\log 0``), so
    the tree is rebuilt with evaluation on.  A node whose class cannot be rebuilt is kept as it is.
    The tree was screened for numbers too large to compute (``_screen``) before this runs.
    """
    if _is_undefined_atom(e):
        return None
    if not e.args:
        return e
    args = []
    for arg in e.args:
        value = _evaluated(arg) if isinstance(arg, Basic) else arg
        if value is None:
            return None
        args.append(value)
    try:
        rebuilt = e.func(*args)
    except Exception:  # noqa: BLE001 - a class whose constructor wants other arguments
        return e
    return None if _is_undefined_atom(rebuilt) else rebuilt


def is_undefined(obj: Any) -> bool:
    """Does a parsed answer divide by zero or hold an indeterminate form (zoo / nan) anywhere?"""
    items = list(obj) if isinstance(obj, MatrixBase) else [obj]
    return any(isinstance(item, Basic) and _evaluated(item) is None for item in items)


# --------------------------------------------------------------------------
# comparison (predicted vs gold; not symmetric: the gold decides tolerance and assignment unwrapping)
# --------------------------------------------------------------------------


def _to_rational(e: Any) -> Any:
    """Floats -> exact Rationals from their decimal digits (0.1 -> 1/10)."""
    if isinstance(e, Basic) and e.has(sympy.Float):
        return e.xreplace({f: Rational(str(f)) for f in e.atoms(sympy.Float)})
    return e


def _is_relation(e: Any) -> bool:
    if isinstance(e, Relational):
        return True
    return isinstance(e, And) and all(isinstance(a, Relational) for a in e.args)


def _canon(e: Any) -> Any:
    """a > b -> b < a, a >= b -> b <= a; 2 = x -> x = 2."""
    if type(e) in _FLIP:
        return _FLIP[type(e)](e.rhs, e.lhs, evaluate=False)
    if isinstance(e, Equality) and _is_name(e.rhs) and not _is_name(e.lhs):
        return Equality(e.rhs, e.lhs, evaluate=False)
    if isinstance(e, And):
        return And(*[_canon(a) for a in _unsorted(e)], evaluate=False)
    return e


def _is_name(e: Any) -> bool:
    """x, or f(x): the left side of an assignment."""
    return isinstance(e, sympy.Symbol) or (isinstance(e, AppliedUndef) and all(a.is_Symbol for a in e.args))


def _unsorted(e: Any) -> tuple:
    return tuple(getattr(e, "_unsorted_args", None) or e.args)


def _unwrap_assignment(e: Any) -> Any:
    if isinstance(e, Equality) and _is_name(e.lhs):
        return e.rhs
    return e


def _as_set(rel: Any) -> Any:
    syms = rel.free_symbols
    if len(syms) != 1:
        return rel
    try:
        return rel.as_set()
    except Exception:  # noqa: BLE001
        return rel


def _seq(e: Any) -> tuple | None:
    """Ordered elements of a tuple, or of an open interval written as a pair (a, b)."""
    if isinstance(e, Tuple):
        return e.args
    if isinstance(e, Interval) and e.left_open and e.right_open and not e.start.is_infinite and not e.end.is_infinite:
        return (e.start, e.end)
    return None


def _relation_against(r: Any, other: Any) -> Any:
    """Relation `r` compared with non-relation `other`: its assignment unwrapped, and a relation still as a
    set when `other` is an infinite set."""
    r = _unwrap_assignment(r)
    if _is_relation(r) and isinstance(other, Set) and not isinstance(other, FiniteSet):
        r = _as_set(r)
    return r


def equal(p: Any, g: Any) -> bool:
    """True if the predicted object ``p`` equals the gold object ``g``."""
    p, g = _canon(p), _canon(g)
    p, g = _relations_as_set(p, g), _relations_as_set(g, p)
    if _is_relation(p) != _is_relation(g):
        if _is_relation(g):
            g = _relation_against(g, p)
        else:
            p = _relation_against(p, g)
    try:
        if p == g:
            return True
    except Exception:  # noqa: BLE001
        pass
    if isinstance(p, MatrixBase) or isinstance(g, MatrixBase):
        p, g = _as_vector(p, g), _as_vector(g, p)
        return (isinstance(p, MatrixBase) and isinstance(g, MatrixBase) and p.shape == g.shape
                and len(g) <= MAX_ITEMS and all(equal(a, b) for a, b in zip(p, g)))
    if _is_relation(p) or _is_relation(g):
        return _is_relation(p) and _is_relation(g) and _relations_equal(p, g)
    if isinstance(p, (Set, Tuple)) or isinstance(g, (Set, Tuple)):
        return _collections_equal(p, g)
    if isinstance(p, Expr) and isinstance(g, Expr):
        return _expr_equal(p, g)
    return False


def _as_vector(e: Any, other: Any) -> Any:
    """A tuple ``(1, 2)`` (or an open interval written as a pair) as the shape of the vector ``other`` (a
    one-column or one-row matrix); else ``e``."""
    items = _seq(e)
    if items is not None and isinstance(other, MatrixBase) and 1 in other.shape and len(items) == len(other):
        return sympy.Matrix(other.shape[0], other.shape[1], list(items))
    return e


def _relations_as_set(e: Any, other: Any) -> Any:
    """``x < 3, x > 5`` ("x < 3 or x > 5") as the union of its solution sets when ``other`` is an interval or a
    union of them; else ``e``."""
    if not isinstance(e, FiniteSet) or not isinstance(other, Set) or isinstance(other, FiniteSet):
        return e
    items = _unsorted(e)
    if not items or len(items) > MAX_ITEMS or not all(isinstance(a, Relational) for a in items):
        return e
    if len(set().union(*(a.free_symbols for a in items))) != 1:
        return e
    parts = [_as_set(a) for a in items]
    return sympy.Union(*parts) if all(isinstance(part, Set) for part in parts) else e


def _relations_equal(p: Any, g: Any) -> bool:
    if isinstance(p, And) or isinstance(g, And):
        pa, ga = _unsorted(p) if isinstance(p, And) else (p,), _unsorted(g) if isinstance(g, And) else (g,)
        return len(pa) == len(ga) and all(_relations_equal(_canon(a), _canon(b)) for a, b in zip(pa, ga))
    if type(p) is not type(g):
        return _same_solutions(p, g)
    dp, dg = p.lhs - p.rhs, g.lhs - g.rhs
    if isinstance(g, Equality):
        if _is_name(g.lhs) and _is_name(p.lhs) and g.lhs != p.lhs:
            return False  # x = 1 is not y = 1
        return _expr_equal(dp, dg) or _expr_equal(-dp, dg) or _same_solutions(p, g)
    return _expr_equal(dp, dg) or _same_solutions(p, g)


def _same_solutions(p: Any, g: Any) -> bool:
    """One-variable relations with the same solution set (2x <= 10 and x <= 5; 2x = 4 and x = 2)."""
    if len(g.free_symbols) != 1 or p.free_symbols != g.free_symbols:
        return False
    ps, gs = _as_set(p), _as_set(g)
    return isinstance(ps, Set) and isinstance(gs, Set) and _collections_equal(ps, gs)


def _collections_equal(p: Any, g: Any) -> bool:
    if isinstance(p, Interval) and isinstance(g, Interval):
        return (p.left_open == g.left_open and p.right_open == g.right_open
                and equal(p.start, g.start) and equal(p.end, g.end))
    ps, gs = _seq(p), _seq(g)
    if ps is None and isinstance(p, FiniteSet) and gs is not None:
        ps = _unsorted(p)  # a bare list "1, 2" against a tuple: in the written order (as Math-Verify)
    if gs is None and isinstance(g, FiniteSet) and ps is not None:
        gs = _unsorted(g)
    if ps is not None and gs is not None:
        return len(ps) == len(gs) <= MAX_ITEMS and all(equal(a, b) for a, b in zip(ps, gs))
    if not isinstance(p, Set):
        p = FiniteSet(p)
    if not isinstance(g, Set):
        g = FiniteSet(g)
    if isinstance(p, FiniteSet) and isinstance(g, FiniteSet):
        return _unordered_equal(list(_unsorted(p)), list(_unsorted(g)))
    if isinstance(p, FiniteSet) != isinstance(g, FiniteSet):
        return False
    try:
        return p.symmetric_difference(g).is_empty is True
    except Exception:  # noqa: BLE001
        return False


def _unordered_equal(ps: list, gs: list) -> bool:
    if len(ps) != len(gs) or len(gs) > MAX_ITEMS:
        return False
    unused = list(ps)
    for g in gs:
        for i, p in enumerate(unused):
            if equal(p, g):
                del unused[i]
                break
        else:
            return False
    return True


def _numeric_value(e: Expr) -> complex | None:
    try:
        v = complex(e.evalf(30))
    except Exception:  # noqa: BLE001 - not numeric after all
        return None
    return v if all(map(math.isfinite, (v.real, v.imag))) else None


def _clearly_different(a: complex | None, b: complex | None) -> bool:
    return a is not None and b is not None and abs(a - b) > 1e-9 * max(abs(a), abs(b), 1e-9)


def _differ_at_points(p: Expr, g: Expr) -> bool:
    """True if p and g take clearly different values at a sample point (so simplify is not needed)."""
    syms = sorted(p.free_symbols | g.free_symbols, key=lambda s: s.name)
    for k in range(2):
        point = {s: Rational(3 + 7 * i + 5 * k, 11 + 2 * k) for i, s in enumerate(syms)}
        try:
            a, b = _numeric_value(p.xreplace(point)), _numeric_value(g.xreplace(point))
        except Exception:  # noqa: BLE001
            continue
        if _clearly_different(a, b):
            return True
    return False


def _expr_equal(p: Expr, g: Expr) -> bool:
    """Exact for exact golds; relative ``REL_TOL`` for inexact (Float) or irrational numeric golds."""
    if p.free_symbols or g.free_symbols:
        p, g = _to_rational(p), _to_rational(g)
        diff = p - g
        if diff == 0:
            return True
        if diff.is_number or _differ_at_points(p, g):
            return False  # the symbols cancelled to a nonzero constant, or a sample point differs
        if sympy.simplify(diff) == 0:
            return True
        return p.equals(g) is True
    if g.is_Number and not p.is_Number:
        return False  # as at the top level: a written number needs a written number, not 10 + 11
    tolerant = g.has(sympy.Float) or not _to_rational(g).is_Rational
    p, g = _to_rational(p), _to_rational(g)
    if p == g:
        return True
    if p.is_Rational and g.is_Rational:
        return tolerant and abs(p - g) <= Rational(1, 10**6) * max(abs(p), abs(g))
    a, b = _numeric_value(p), _numeric_value(g)
    if tolerant:
        return a is not None and b is not None and abs(a - b) <= REL_TOL * max(abs(a), abs(b))
    if _clearly_different(a, b):
        return False
    return sympy.simplify(p - g) == 0  # an exact gold needs a proof, not a close value


# --------------------------------------------------------------------------
# the worker's request handlers
# --------------------------------------------------------------------------


def compare_default(request: tuple) -> bool:
    """(predicted, gold, predicted_percent, gold_percent[, in_order]) normalised strings -> verdict.

    ``in_order``: both are bare comma lists, compared element by element in the written order
    (``GradingOptions.unordered_lists`` off); otherwise such lists compare as sets.
    """
    pred_s, gold_s, pred_pct, gold_pct, *rest = request
    in_order = bool(rest and rest[0])
    complex_ = is_complex(pred_s) or is_complex(gold_s)
    p, g = parse_latex(pred_s, complex_), parse_latex(gold_s, complex_)
    if p is None or g is None or is_undefined(p) or is_undefined(g):
        return False  # an undefined value (1/0, 9:00 read as 9/0) equals nothing, not even itself
    if in_order and isinstance(p, FiniteSet) and isinstance(g, FiniteSet):
        ps, gs = _unsorted(p), _unsorted(g)
        return len(ps) == len(gs) <= MAX_ITEMS and all(equal(a, b) for a, b in zip(ps, gs))
    if equal(p, g):
        return True
    if pred_pct != gold_pct and isinstance(p, Expr) and isinstance(g, Expr):
        return equal(p / 100, g) if pred_pct else equal(p, g / 100)
    return False


def compare_math_verify(request: tuple) -> bool:
    """Math-Verify's own parse + verify (its default extraction configs, which include parse_expr)."""
    from math_verify import parse, verify

    pred_s, gold_s = request
    wrap = lambda s: s if ("$" in s or "\\boxed" in s or "\\(" in s) else f"${s}$"  # noqa: E731
    gold = parse(wrap(gold_s), parsing_timeout=None)
    pred = parse(wrap(pred_s), parsing_timeout=None)
    if any(is_undefined(item) for item in (*gold, *pred)):
        return False  # as in the default grader: 1/0 equals nothing
    return bool(gold) and bool(pred) and verify(gold, pred, timeout_seconds=None) is True


def parses_undefined(s: str) -> bool:
    """Does a normalised answer parse to an undefined value (``1/0``, ``0/0``, ``\\infty - \\infty``)?

    False when it does not parse at all: the caller compares a text with itself and keeps that verdict.
    """
    parsed = parse_latex(s, is_complex(s))
    return parsed is not None and is_undefined(parsed)


def serve(request: tuple) -> bool:
    """Dispatch one worker request ``(kind, payload)``; never raises (False on any error).

    Kinds: "default" (:func:`compare_default`), "math_verify" (:func:`compare_math_verify`),
    "undefined" (:func:`parses_undefined`).
    """
    grader, payload = request
    try:
        if grader == "math_verify":
            return compare_math_verify(payload)
        if grader == "undefined":
            return parses_undefined(payload)
        return compare_default(payload)
    except Exception:  # noqa: BLE001
        return False
