"""Answer extraction and equivalence checking for math rewards.

Model output is untrusted text, so this module never evaluates it as code.

Safety design
-------------
* No ``eval``/``exec`` and no ``sympy.sympify``/``parse_expr``/``parse_latex``
  on model text (they call ``eval`` internally).
* Text is first reduced by a small LaTeX normaliser (``\\frac``, ``\\sqrt``,
  ``\\cdot``, ``\\pi``, ``^``, braces, ...) and a whitelist tokenizer (numbers,
  names, ``+ - * / ** ^ ( )``; anything else is rejected) to a plain
  arithmetic string.  Length (``MAX_ANSWER_CHARS``) and bracket nesting
  (``MAX_NESTING``) are checked *before* ``ast.parse``, which can otherwise
  raise ``RecursionError``/``MemoryError`` on pathological input.
* The AST is walked with a whitelist (numbers, ``+ - * / **``, unary ``+ -``,
  ``sqrt(...)``, ``pi`` and, for the symbolic path only, names as
  ``sympy.Symbol``).  Sympy objects are built directly from the nodes;
  decimals become exact ``Rational``s.
* Size guards: exponents must satisfy ``|e| <= MAX_EXPONENT``, the estimated
  size of ``base ** e`` and every intermediate rational must stay below
  ``MAX_BITS`` (~1000 decimal digits).  ``9**9**9`` is rejected instantly.
* Roots: sympy factors radicands when it combines them (``sqrt(a)*sqrt(b)``
  -> ``sqrt(a*b)``), so the total size of numbers under roots in the
  operands of any operation is capped at ``MAX_RADICAND_BITS``.
* Numeric answers are compared in-process (exact rationals, otherwise
  ``evalf`` with relative tolerance ``REL_TOL``); building them is bounded by
  the guards above plus a deadline checked between AST nodes.  Symbolic
  comparisons (``simplify(a - b) == 0`` / ``a.equals(b)``) run in one lazily
  forked worker process (``os.fork`` + a pipe; the worker is reused).  If it
  does not answer before the deadline (``timeout``, default 1 s, shared by
  all elements of a tuple) it is killed with SIGKILL, the comparison counts
  as unequal, and a fresh worker is forked on the next request.  A call to
  :func:`answers_equal` therefore takes at most about ``timeout`` plus a few
  milliseconds and never hangs.
"""

from __future__ import annotations

import ast
import atexit
import os
import re
import signal
import threading
import time
import warnings
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from multiprocessing import Pipe

import sympy

__all__ = ["extract_answer", "gsm8k_gold", "normalize_answer", "answers_equal"]

MAX_ANSWER_CHARS = 500  # longer answers are never parsed
MAX_NESTING = 50  # bracket depth limit, checked before ast.parse
MAX_AST_DEPTH = 100  # recursion limit of the AST walk (unary chains etc.)
MAX_AST_NODES = 600
MAX_EXPONENT = 100  # |exponent| and exponent denominator bound
MAX_BITS = 3400  # ~1000 decimal digits for any rational in a result
MAX_RADICAND_BITS = 512  # sympy factors radicands (sqrt(a)*sqrt(b) -> sqrt(a*b))
REL_TOL = 1e-6

# --------------------------------------------------------------------------
# extraction
# --------------------------------------------------------------------------

_NUMBER = r"[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:/\d+)?"  # 1,234 -2.5 3/4
_NUMBER_RE = re.compile(_NUMBER)
_ANSWER_IS_RE = re.compile(r"\banswer\s*(?:is\b|:)\s*:?[ \t]*", re.IGNORECASE)
_PROSE_RE = re.compile(r"[A-Za-z]{2,} +[A-Za-z]{2,} +[A-Za-z]{2,}")
_LEADING_NUMBER_RE = re.compile(rf"\$?({_NUMBER})\s+[A-Za-z]")


def _clean(s: str) -> str:
    """Strip whitespace, surrounding ``$`` and trailing periods."""
    prev = None
    while prev != s:
        prev = s
        s = s.strip().rstrip(".").strip().strip("$")
    return s


def _last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (balanced braces), or None."""
    start = text.rfind("\\boxed")
    if start < 0:
        return None
    i = start + len("\\boxed")
    while i < len(text) and text[i] in " \t":
        i += 1
    if i >= len(text) or text[i] != "{":
        m = re.match(r"\s+([^\s$]+)", text[start + len("\\boxed"):])  # "\boxed 5"
        return m.group(1) if m else None
    depth = 0
    for j in range(i, len(text)):
        c = text[j]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None  # unbalanced (truncated) box


def extract_answer(text: str) -> str | None:
    """Return the final answer in a model's text, or None.

    Priority: text after the last ``####`` (to end of line), the last
    ``\\boxed{...}``, "The answer is X" / "answer: X", the last number.
    """
    if not isinstance(text, str):
        return None
    idx = text.rfind("####")
    if idx >= 0:
        ans = _clean(text[idx + 4 :].split("\n", 1)[0])
        if ans:
            return ans
    boxed = _last_boxed(text)
    if boxed is not None and _clean(boxed):
        return _clean(boxed)
    last = None
    for last in _ANSWER_IS_RE.finditer(text):
        pass
    if last is not None:
        ans = _clean(text[last.end() :].lstrip().split("\n", 1)[0])
        m = _LEADING_NUMBER_RE.match(ans)  # "18 apples" -> "18"
        if m:
            return m.group(1)
        if _PROSE_RE.search(ans):  # "that she has 5 apples" -> "5"
            nums = _NUMBER_RE.findall(ans)
            if nums:
                return nums[-1]
        if ans:
            return ans
    last = None
    for last in _NUMBER_RE.finditer(text):
        pass
    return last.group(0) if last is not None else None


def gsm8k_gold(answer_field: str) -> str:
    """Gold answer of a GSM8K ``answer`` field: text after ``####``, commas removed."""
    idx = answer_field.rfind("####")
    if idx < 0:
        raise ValueError(f"GSM8K answer field has no '####' marker: {answer_field[-80:]!r}")
    gold = answer_field[idx + 4 :].strip().split("\n", 1)[0].strip().replace(",", "")
    if not gold:
        raise ValueError("GSM8K answer field has an empty answer after '####'")
    return gold


# --------------------------------------------------------------------------
# normalisation
# --------------------------------------------------------------------------

_TEXT_RE = re.compile(r"\\(?:text|mbox)\s*\{([^{}]*)\}(?:\s*\^\s*(?:\{\s*\d+\s*\}|\d))?")
_FORMAT_RE = re.compile(r"\\(?:textbf|mathrm|mathbf|textrm)\s*\{([^{}]*)\}")
_COMMA_NUMBER_RE = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?%?")


def normalize_answer(answer: str) -> str:
    """Canonical string form of an answer (no evaluation).

    Removes ``$``, ``\\text{...}`` units, ``\\left``/``\\right``, LaTeX spacing,
    degree marks, a leading ``x =``, trailing periods, thousands separators
    and spaces; maps ``\\dfrac``/``\\tfrac`` to ``\\frac``, ``\\%`` to ``%``
    and the unicode minus to ``-``.
    """
    s = answer.strip().replace("−", "-")
    if s.startswith("\\boxed{") and s.endswith("}"):
        s = s[len("\\boxed{") : -1]
    s = re.sub(r"\\(?:left|right)(?![A-Za-z])", "", s)
    s = re.sub(r"\\[!,;: ]|\\displaystyle", "", s)
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?|°", "", s)
    s = s.replace("\\%", "%").replace("\\$", "").replace("$", "")
    s = re.sub(r"\\[dt]frac(?![A-Za-z])", r"\\frac", s)
    without_units = _TEXT_RE.sub("", s)
    s = without_units if without_units.strip() else _TEXT_RE.sub(r"\1", s)
    s = _FORMAT_RE.sub(r"\1", s)
    s = re.sub(r"^[A-Za-z]\s*=\s*(?=\S)", "", s.strip())
    s = re.sub(r"\s+", " ", s)
    s = re.sub(r"(?<![A-Za-z]) | (?![A-Za-z])", "", s)  # keep spaces only between letters
    s = s.rstrip(".")
    if _COMMA_NUMBER_RE.fullmatch(s):
        s = s.replace(",", "")
    return s


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
        depth = 0
        for j in range(i, len(s)):
            if s[j] == "{":
                depth += 1
            elif s[j] == "}":
                depth -= 1
                if depth == 0:
                    return s[i + 1 : j], j + 1
        raise ValueError("unbalanced braces")
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
    r"\s*(?:(?P<num>\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)"
    r"|(?P<name>[A-Za-z][A-Za-z0-9_]*)|(?P<op>\*\*|[-+*/^()]))"
)
_FUNCTIONS = {"sqrt"}


def _tokens_to_source(s: str, implicit_mul: bool) -> str:
    """Re-emit ``s`` from whitelisted tokens (``^`` -> ``**``); raises ValueError.

    With ``implicit_mul``, ``2x``, ``2(x+1)``, ``(a)(b)`` and ``pi x`` get a ``*``.
    """
    out: list[str] = []
    prev_kind = None  # "operand" | "func" | "open" | "op"
    pos, n = 0, len(s)
    while pos < n:
        m = _TOKEN_RE.match(s, pos)
        if m is None or m.end() == pos:
            if s[pos:].strip() == "":
                break
            raise ValueError(f"unexpected character {s[pos]!r}")
        pos = m.end()
        if m.group("num") is not None:
            tok = re.sub(r"^0+(?=\d)", "", m.group("num"))  # "05" is a SyntaxError
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


def _max_nesting(s: str) -> int:
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
    if len(answer) > MAX_ANSWER_CHARS or _max_nesting(answer) > MAX_NESTING:
        return None
    try:
        s = re.sub(r"_\{([A-Za-z0-9]+)\}", r"_\1", answer)
        return _tokens_to_source(_latex_to_plain(s), implicit_mul=True)
    except (ValueError, RecursionError):
        return None


# --------------------------------------------------------------------------
# whitelisted AST -> sympy
# --------------------------------------------------------------------------


class _Rejected(Exception):
    """Expression is invalid, unsafe or too large."""


_BAD_VALUES = (sympy.nan, sympy.zoo, sympy.oo, -sympy.oo)
_INT_RE = re.compile(r"\d+")
_DEC_RE = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


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
            if self.symbolic and re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,30}", node.id):
                return sympy.Symbol(node.id)
            raise _Rejected("name not allowed")
        raise _Rejected(f"syntax not allowed: {type(node).__name__}")


def _parse_source(src: str, symbolic: bool, deadline: float | None = None) -> sympy.Expr | None:
    """Parse whitelisted arithmetic source into sympy; None if rejected. Never raises."""
    try:
        if len(src) > 4 * MAX_ANSWER_CHARS or _max_nesting(src) > MAX_NESTING + 10:
            return None
        tree = ast.parse(src, mode="eval")
        if sum(1 for _ in ast.walk(tree)) > MAX_AST_NODES:
            return None
        return _Builder(src, symbolic, deadline).build(tree.body)
    except Exception:  # noqa: BLE001 - SyntaxError, RecursionError, MemoryError, _Rejected, ...
        return None


# --------------------------------------------------------------------------
# time-bounded symbolic comparison in a forked worker
# --------------------------------------------------------------------------


def _symbolic_equal_unbounded(a: sympy.Expr, b: sympy.Expr) -> bool:
    """Symbolic equality; may be slow, so only ever run inside the worker."""
    diff = a - b
    if diff == 0 or sympy.simplify(diff) == 0:
        return True
    return a.equals(b) is True


def _worker_loop(conn, parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        try:
            if not conn.poll(1.0):
                continue
            a, b = conn.recv()  # sympy objects built by _parse_source (trusted)
        except (EOFError, OSError):
            return
        try:
            result = _symbolic_equal_unbounded(a, b)
        except Exception:  # noqa: BLE001
            result = False
        conn.send(result)


class _SymbolicWorker:
    """One lazily forked worker process; killed and re-forked after a timeout."""

    def __init__(self) -> None:
        self._forget()

    def _forget(self) -> None:
        """Drop all state (also run in forked children: the worker is not theirs)."""
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._conn = None

    def _start(self) -> None:
        parent_conn, child_conn = Pipe()
        parent_pid = os.getpid()
        with warnings.catch_warnings():  # Python >= 3.12 warns about fork with threads
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # child: serve requests until the parent goes away
            try:
                parent_conn.close()
                _worker_loop(child_conn, parent_pid)
            finally:
                os._exit(0)
        child_conn.close()
        self._pid, self._conn = pid, parent_conn

    def stop(self) -> None:
        """Kill the worker (if any)."""
        if self._pid is not None:
            try:
                os.kill(self._pid, signal.SIGKILL)
                os.waitpid(self._pid, 0)
            except OSError:
                pass
        if self._conn is not None:
            try:
                self._conn.close()
            except OSError:
                pass
        self._pid = self._conn = None

    def equal(self, a: sympy.Expr, b: sympy.Expr, timeout: float) -> bool:
        """True iff the worker proves ``a == b`` within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        if not self._lock.acquire(timeout=max(timeout, 0.0)):
            return False
        answered = False
        try:
            if self._pid is None:
                self._start()
            self._conn.send((a, b))
            if self._conn.poll(max(deadline - time.monotonic(), 0.0)):
                result = self._conn.recv()
                answered = True
                return result is True
            return False
        except Exception:  # noqa: BLE001 - broken pipe, fork failure, ...
            return False
        finally:
            if not answered:  # timed out or failed: kill; a new worker is forked next time
                self.stop()
            self._lock.release()


_WORKER = _SymbolicWorker()
atexit.register(_WORKER.stop)
os.register_at_fork(after_in_child=_WORKER._forget)


# --------------------------------------------------------------------------
# equivalence
# --------------------------------------------------------------------------


def _numbers_close(a: sympy.Expr, b: sympy.Expr) -> bool:
    """Compare two numeric (symbol-free) expressions with relative tolerance."""
    if a.is_Rational and b.is_Rational:
        if a == b:
            return True
        scale = max(abs(a), abs(b))
        return bool(abs(a - b) <= sympy.Rational(1, 10**6) * scale)
    diff = abs((a - b).evalf(30))
    scale = max(abs(a.evalf(30)), abs(b.evalf(30)))
    return bool(diff <= REL_TOL * scale)


def _split_percent(s: str) -> tuple[str, bool]:
    return (s[:-1], True) if s.endswith("%") else (s, False)


_NUMBER_LITERAL = re.compile(
    r"^[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?(?:/\d+)?|\\frac(?:\{[-+]?\d+\}|\d)(?:\{\d+\}|\d))$")


def is_number_literal(answer: str) -> bool:
    """True for a written-out number: 12, -0.5, 2e5, 3/4, \\frac{3}{4} (after normalize_answer)."""
    while answer.startswith("(") and answer.endswith(")"):
        answer = answer[1:-1]
    return bool(_NUMBER_LITERAL.match(answer))


def _scalar_equal(a: str, b: str, deadline: float) -> bool:
    """Equality of two normalised non-tuple answers (a: predicted, b: gold)."""
    if a == b:
        return True
    a, a_pct = _split_percent(a)
    b, b_pct = _split_percent(b)
    if is_number_literal(b) and not is_number_literal(a):
        # The gold is a number, so the answer must be one: "10 + 11" for 21 leaves the arithmetic to the
        # grader, and a policy rewarded for it learns to copy the question (seen in a GRPO run).
        return False
    src_a, src_b = _to_source(a), _to_source(b)
    if src_a is None or src_b is None:
        return a == b
    ea = _parse_source(src_a, symbolic=True, deadline=deadline)
    eb = _parse_source(src_b, symbolic=True, deadline=deadline)
    if ea is None or eb is None:
        return False
    # Exactly one side has "%": "50%" matches both "50" and "0.5".
    candidates = [(ea, eb)]
    if a_pct != b_pct:
        candidates.append((ea / 100, eb) if a_pct else (ea, eb / 100))
    for x, y in candidates:
        if not x.free_symbols and not y.free_symbols:
            try:
                if _numbers_close(x, y):
                    return True
            except Exception:  # noqa: BLE001 - incomparable values
                pass
            continue
        if not x.free_symbols or not y.free_symbols:
            continue  # number vs expression with symbols (e.g. prose): unequal
        diff = x - y
        if diff == 0:
            return True
        if diff.is_number:  # symbols cancelled to a nonzero constant
            continue
        remaining = deadline - time.monotonic()
        if remaining > 0 and _WORKER.equal(x, y, remaining):
            return True
    return False


def _split_tuple(s: str) -> tuple[str, str, list[str]] | None:
    """``(1,2)`` -> ("(", ")", ["1", "2"]); None when not a top-level tuple/list."""
    open_, close = "", ""
    if len(s) >= 2 and s[0] in "([" and s[-1] in ")]":
        depth = 0
        for i, c in enumerate(s):
            depth += c in "([{"
            depth -= c in ")]}"
            if depth == 0 and i < len(s) - 1:
                break  # outer bracket closes early, e.g. "(1)+(2)"
        else:
            open_, close, s = s[0], s[-1], s[1:-1]
    items, depth, start = [], 0, 0
    for i, c in enumerate(s):
        depth += c in "([{"
        depth -= c in ")]}"
        if c == "," and depth == 0:
            items.append(s[start:i])
            start = i + 1
    if not items:
        return None
    items.append(s[start:])
    return open_, close, items


def answers_equal(predicted: str | None, gold: str, timeout: float = 1.0) -> bool:
    """True if ``predicted`` is equivalent to ``gold``. Never raises.

    Handles thousands separators, decimals, (LaTeX) fractions, ``$``, units,
    the unicode minus, relative tolerance ``REL_TOL``, tuples/intervals
    (elementwise, bracket types must match) and symbolic equality (time-bounded
    by ``timeout`` seconds in total).  Percentages: if exactly one side ends in
    ``%`` then "50%" equals both "50" and "0.5".
    """
    try:
        deadline = time.monotonic() + max(float(timeout), 0.0)
        if not isinstance(predicted, str) or not isinstance(gold, str):
            return False
        if len(predicted) > MAX_ANSWER_CHARS or len(gold) > MAX_ANSWER_CHARS:
            return False
        a, b = normalize_answer(predicted), normalize_answer(gold)
        if not a or not b:
            return False
        if a == b:
            return True
        if _max_nesting(a) > MAX_NESTING or _max_nesting(b) > MAX_NESTING:
            return False
        ta, tb = _split_tuple(a), _split_tuple(b)
        if ta is None and tb is None:
            return _scalar_equal(a, b, deadline)
        if ta is None or tb is None or ta[:2] != tb[:2] or len(ta[2]) != len(tb[2]):
            return False
        return all(_scalar_equal(x, y, deadline) for x, y in zip(ta[2], tb[2]))
    except Exception:  # noqa: BLE001 - never raise on untrusted input
        return False
