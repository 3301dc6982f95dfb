"""Whitelisted arithmetic: LaTeX fragment -> plain arithmetic source -> sympy, never evaluating text as code.

Used by the calculator (:mod:`lmgym.envs.calculator`); :mod:`lmgym.envs.answers` uses its size limits
(``MAX_ANSWER_CHARS``, ``MAX_NESTING``, ``max_nesting``).

Safety design
-------------
* Text is reduced by a small LaTeX normaliser (``\\frac``, ``\\sqrt``, ``\\cdot``, ``\\pi``, ``^``,
  braces, ...) and a whitelist tokenizer (numbers, names, ``+ - * / ** ^ ( )``; anything else is
  rejected) to a plain arithmetic string.  Length and bracket nesting (``MAX_NESTING``) are checked
  *before* ``ast.parse``, which can otherwise raise ``RecursionError``/``MemoryError``.
* The AST is walked with a whitelist (numbers, ``+ - * / **``, unary ``+ -``, ``sqrt(...)``, ``pi``
  and, in symbolic mode, names as ``sympy.Symbol``); sympy objects are built directly from the nodes
  and decimals become exact ``Rational``s.  No ``eval``, ``sympify`` or ``parse_expr``.
* Size guards: ``|exponent| <= MAX_EXPONENT``, every intermediate rational below ``MAX_BITS``, numbers
  under roots below ``MAX_RADICAND_BITS`` (sympy factors radicands), a deadline between AST nodes.
* Every regex is module-level and linear (tested against ReDoS shapes).
"""

from __future__ import annotations

import ast
import re
import time
from decimal import Decimal, InvalidOperation
from fractions import Fraction

import sympy

MAX_ANSWER_CHARS = 500  # longer answers are never parsed
MAX_NESTING = 50  # bracket depth limit, checked before ast.parse
MAX_AST_DEPTH = 100  # recursion limit of the AST walk (unary chains etc.)
MAX_AST_NODES = 600
MAX_EXPONENT = 100  # |exponent| and exponent denominator bound
MAX_BITS = 3400  # ~1000 decimal digits for any rational in a result
MAX_RADICAND_BITS = 512  # sympy factors radicands (sqrt(a)*sqrt(b) -> sqrt(a*b))

# --------------------------------------------------------------------------
# LaTeX -> plain arithmetic string
# --------------------------------------------------------------------------

_FRAC_CMDS = {"frac", "dfrac", "tfrac"}
_OP_CMDS = {"cdot": "*", "times": "*", "ast": "*", "div": "/", "pi": " pi "}
_WRAP_CMDS = {"text", "mathrm", "textbf", "mathbf", "mbox", "textrm", "left", "right"}
_UNICODE = {"×": "*", "·": "*", "÷": "/", "−": "-", "π": " pi "}


def _read_command(s: str, i: int) -> tuple[str, int]:
    """Read ``\\name`` starting at ``s[i] == '\\'``; return (name, next index)."""
    j = i + 1
    while j < len(s) and s[j].isalpha():
        j += 1
    if j == i + 1:
        raise ValueError("bad command")
    return s[i + 1 : j], j


def _read_arg(s: str, i: int) -> tuple[str, int]:
    """Read one LaTeX argument (``{...}``, ``\\cmd`` or one character)."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        raise ValueError("missing argument")
    if s[i] == "{":
        j = closing_brace(s, i)
        if j < 0:
            raise ValueError("unbalanced braces")
        return s[i + 1 : j], j + 1
    if s[i] == "\\":
        _, j = _read_command(s, i)
        return s[i:j], j
    return s[i], i + 1


def _latex_to_plain(s: str) -> str:
    """Convert a LaTeX math fragment to plain arithmetic; raises ValueError."""
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            name, i = _read_command(s, i)
            if name in _FRAC_CMDS:
                num, i = _read_arg(s, i)
                den, i = _read_arg(s, i)
                out.append(f"(({_latex_to_plain(num)})/({_latex_to_plain(den)}))")
            elif name == "sqrt":
                root = None
                if i < len(s) and s[i] == "[":
                    end = s.find("]", i)
                    if end < 0:
                        raise ValueError("unbalanced sqrt index")
                    root, i = _latex_to_plain(s[i + 1 : end]), end + 1
                arg, i = _read_arg(s, i)
                arg = _latex_to_plain(arg)
                out.append(f" sqrt({arg})" if root is None else f"(({arg})**(1/({root})))")
            elif name in _OP_CMDS:
                out.append(_OP_CMDS[name])
            elif name in _WRAP_CMDS:
                continue
            else:
                raise ValueError(f"unsupported command \\{name}")
        elif c == "{":
            out.append("(")
            i += 1
        elif c == "}":
            out.append(")")
            i += 1
        else:
            out.append(_UNICODE.get(c, c))
            i += 1
    return "".join(out)


_TOKEN_RE = re.compile(
    r"(?:(?P<num>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
    r"|(?P<name>[A-Za-z][A-Za-z0-9_]*)|(?P<op>\*\*|[-+*/^()]))"
)
_FUNCTIONS = {"sqrt"}
_LEADING_ZEROS_RE = re.compile(r"^0+(?=\d)")
_BRACED_SUBSCRIPT_RE = re.compile(r"_\{([A-Za-z0-9]+)\}")
_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,30}")


def tokens_to_source(s: str, implicit_mul: bool) -> str:
    """Re-emit ``s`` from whitelisted tokens (``^`` -> ``**``); raises ValueError.

    With ``implicit_mul``, ``2x``, ``2(x+1)``, ``(a)(b)`` and ``pi x`` get a ``*``.
    """
    out: list[str] = []
    prev_kind = None  # "operand" | "func" | "open" | "op"
    pos, n = 0, len(s)
    while pos < n:
        while pos < n and s[pos].isspace():  # skipped here, not by a leading \s* (quadratic in search)
            pos += 1
        if pos == n:
            break
        m = _TOKEN_RE.match(s, pos)
        if m is None:
            raise ValueError(f"unexpected character {s[pos]!r}")
        pos = m.end()
        if m.group("num") is not None:
            tok = _LEADING_ZEROS_RE.sub("", m.group("num"))  # "05" is a SyntaxError
            kind, starts_operand = "operand", True
        elif m.group("name") is not None:
            tok = m.group("name")
            kind = "func" if tok in _FUNCTIONS else "operand"
            starts_operand = True
        else:
            tok = "**" if m.group("op") == "^" else m.group("op")
            kind = "open" if tok == "(" else ("operand" if tok == ")" else "op")
            starts_operand = tok == "("
        if implicit_mul and prev_kind == "operand" and starts_operand:
            out.append("*")
        out.append(tok)
        prev_kind = kind
    return " ".join(out)


def closing_brace(s: str, i: int) -> int:
    """Index of the brace closing the one at ``s[i]``, or -1."""
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "{":
            depth += 1
        elif s[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return -1


def max_nesting(s: str) -> int:
    """Deepest bracket nesting (``([{``) in ``s``; linear, never recursive."""
    depth = best = 0
    for c in s:
        if c in "([{":
            depth += 1
            best = max(best, depth)
        elif c in ")]}":
            depth -= 1
    return best


def _to_source(answer: str) -> str | None:
    """Normalised answer -> whitelisted Python arithmetic source, or None."""
    if len(answer) > MAX_ANSWER_CHARS or max_nesting(answer) > MAX_NESTING:
        return None
    try:
        s = _BRACED_SUBSCRIPT_RE.sub(r"_\1", answer)
        return tokens_to_source(_latex_to_plain(s), implicit_mul=True)
    except (ValueError, RecursionError):
        return None


# --------------------------------------------------------------------------
# whitelisted AST -> sympy
# --------------------------------------------------------------------------


class _Rejected(Exception):
    """Expression is invalid, unsafe or too large."""


_BAD_VALUES = (sympy.nan, sympy.zoo, sympy.oo, -sympy.oo)
_INT_RE = re.compile(r"\d+")
_DEC_RE = re.compile(r"(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")  # unambiguous: linear


def _bits(r: sympy.Rational) -> int:
    return max(int(r.p).bit_length(), int(r.q).bit_length())


def _check_size(expr: sympy.Expr) -> sympy.Expr:
    if expr.has(*_BAD_VALUES):
        raise _Rejected("undefined or infinite value")
    for r in expr.atoms(sympy.Rational):
        if _bits(r) > MAX_BITS:
            raise _Rejected("number too large")
    return expr


def _number(src: str, node: ast.Constant) -> sympy.Expr:
    """Exact sympy number from a numeric literal's source text."""
    seg = ast.get_source_segment(src, node) or ""
    if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
        raise _Rejected("non-numeric constant")
    if isinstance(node.value, int):
        if not _INT_RE.fullmatch(seg):
            raise _Rejected("unsupported integer literal")
        return _check_size(sympy.Integer(node.value))
    if not _DEC_RE.fullmatch(seg):
        raise _Rejected("unsupported float literal")
    try:
        d = Decimal(seg)
    except InvalidOperation as e:
        raise _Rejected("bad decimal") from e
    t = d.as_tuple()
    if abs(t.exponent) + len(t.digits) > 1000:  # guards 1e999999999
        raise _Rejected("decimal too large")
    f = Fraction(d)
    return _check_size(sympy.Rational(f.numerator, f.denominator))


def _radicand_bits(*exprs: sympy.Expr) -> int:
    """Total size of the numbers under non-integer powers (roots) in ``exprs``."""
    return sum(
        _bits(r)
        for e in exprs
        for p in e.atoms(sympy.Pow)
        if not p.exp.is_Integer
        for r in p.base.atoms(sympy.Rational)
    )


def _check_radicals(*exprs: sympy.Expr, extra_bits: int = 0) -> None:
    """Reject before combining operands whose roots sympy would have to factor."""
    if _radicand_bits(*exprs) + extra_bits > MAX_RADICAND_BITS:
        raise _Rejected("radicands too large")


def _power(base: sympy.Expr, exp: sympy.Expr) -> sympy.Expr:
    """``base ** exp`` with exponent, root and result-size guards."""
    # For a root (non-integer exponent) the numbers in the base become radicands.
    root_bits = 0 if exp.is_Integer else sum(_bits(r) for r in base.atoms(sympy.Rational))
    _check_radicals(base, exp, extra_bits=root_bits)
    if not exp.free_symbols:
        if exp.is_Rational:
            magnitude = abs(Fraction(int(exp.p), int(exp.q)))
            if magnitude > MAX_EXPONENT or exp.q > MAX_EXPONENT:
                raise _Rejected("exponent too large")
        else:
            value = complex(exp.evalf(15))
            magnitude = abs(value)
            if not magnitude <= MAX_EXPONENT:  # also catches nan
                raise _Rejected("exponent too large")
        base_bits = max((_bits(r) for r in base.atoms(sympy.Rational)), default=1)
        if base_bits * float(magnitude) > MAX_BITS:
            raise _Rejected("power too large")
    return _check_size(base**exp)


class _Builder:
    """Walks a whitelisted AST and builds the sympy expression."""

    def __init__(self, src: str, symbolic: bool, deadline: float | None) -> None:
        self.src, self.symbolic, self.deadline = src, symbolic, deadline

    def build(self, node: ast.AST, depth: int = 0) -> sympy.Expr:
        if depth > MAX_AST_DEPTH:
            raise _Rejected("expression too deep")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _Rejected("timed out")
        if isinstance(node, ast.Constant):
            return _number(self.src, node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            value = self.build(node.operand, depth + 1)
            return -value if isinstance(node.op, ast.USub) else value
        if isinstance(node, ast.BinOp):
            left = self.build(node.left, depth + 1)
            right = self.build(node.right, depth + 1)
            _check_radicals(left, right)
            if isinstance(node.op, ast.Add):
                return _check_size(left + right)
            if isinstance(node.op, ast.Sub):
                return _check_size(left - right)
            if isinstance(node.op, ast.Mult):
                return _check_size(left * right)
            if isinstance(node.op, ast.Div):
                if right == 0:
                    raise _Rejected("division by zero")
                return _check_size(left / right)
            if isinstance(node.op, ast.Pow):
                return _power(left, right)
            raise _Rejected("operator not allowed")
        if isinstance(node, ast.Call):
            if (
                isinstance(node.func, ast.Name)
                and node.func.id == "sqrt"
                and len(node.args) == 1
                and not node.keywords
            ):
                return _power(self.build(node.args[0], depth + 1), sympy.S.Half)
            raise _Rejected("function not allowed")
        if isinstance(node, ast.Name):
            if node.id == "pi":
                return sympy.pi
            if self.symbolic and _NAME_RE.fullmatch(node.id):
                return sympy.Symbol(node.id)
            raise _Rejected("name not allowed")
        raise _Rejected(f"syntax not allowed: {type(node).__name__}")


def parse_source(src: str, symbolic: bool, deadline: float | None = None) -> sympy.Expr | None:
    """Parse whitelisted arithmetic source into sympy; None if rejected. Never raises."""
    try:
        if len(src) > 4 * MAX_ANSWER_CHARS or max_nesting(src) > MAX_NESTING + 10:
            return None
        tree = ast.parse(src, mode="eval")
        if sum(1 for _ in ast.walk(tree)) > MAX_AST_NODES:
            return None
        return _Builder(src, symbolic, deadline).build(tree.body)
    except Exception:  # noqa: BLE001 - SyntaxError, RecursionError, MemoryError, _Rejected, ...
        return None

