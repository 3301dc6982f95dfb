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

import atexit
import os
import re
import signal
import threading
import time
import warnings
from multiprocessing import Pipe

import sympy

from envs.extraction import extract_answer, gsm8k_gold
from envs.safe_arith import (
    MAX_ANSWER_CHARS,
    MAX_NESTING,
    _max_nesting,
    _parse_source,
    _to_source,
)

__all__ = ["extract_answer", "gsm8k_gold", "normalize_answer", "answers_equal"]

REL_TOL = 1e-6

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
