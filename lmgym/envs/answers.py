"""Answer extraction and equivalence checking for math rewards.

Model output is untrusted text, so this module never evaluates it as code.

Safety design
-------------
* No ``eval``/``exec`` and no ``sympy.sympify``/``parse_expr``/``parse_latex`` on model text in the
  default grader (they call ``eval`` internally).
* Every regex is module-level and linear in its input (no nested or adjacent overlapping
  quantifiers; lookbehinds stop searches restarting inside digit runs), so ``normalize_answer``
  is linear on any input; answers longer than ``MAX_ANSWER_CHARS`` are unequal without being
  parsed.
* Plain written-out numbers (``12``, ``-0.5``, ``3/4``, ``\\frac{3}{4}``, ``918\\frac{1}{2}``,
  ``50%``) are parsed in-process by one anchored regex into :class:`fractions.Fraction`
  (:mod:`lmgym.envs.grading.numbers`): microseconds, exact.  When the gold is such a number the
  prediction must be one too (``10 + 11`` is not accepted for 21: a reward hack found in training);
  the worker applies the same rule to the elements of tuples and sets.
* Everything else (LaTeX, expressions, sets, tuples, intervals, relations, matrices) is parsed and
  compared in ONE warm worker process (:mod:`lmgym.envs.grading.worker`, forked once and reused, its
  imports preloaded).  Parsing uses ``latex2sympy2_extended``, an ANTLR LaTeX grammar that builds
  sympy objects node by node (no ``eval`` of the text), after size and nesting caps; the parsed
  tree is screened for numbers too large to compute before anything is evaluated
  (:mod:`lmgym.envs.grading.symbolic`).
* The worker's time is bounded in CPU seconds, not wall-clock seconds, so a loaded machine does
  not change a verdict: ``timeout`` is the request's CPU budget (SIGPROF timer in the worker,
  ``RLIMIT_CPU`` soft and hard limits as backstops for C code; ``RLIMIT_AS`` bounds its memory).
  The parent waits at most ``max(10 s, 20 x timeout)`` of wall-clock time, then kills the worker
  and forks a fresh one on the next request.  A timeout, a crash or a parse failure is unequal.
* ``grader="math_verify"`` (off by default; the [math-verify] extra) runs Math-Verify's own ``parse`` +
  ``verify`` in the same worker under the same CPU bound, for comparability with published numbers.  Its risk: its
  expression extraction calls sympy ``parse_expr`` (i.e. ``eval``) on model text; the worker
  contains the time such text can take, not the code it can run.  Text that looks like code
  (:mod:`lmgym.envs.grading.code_screen`: ``...) or 0``, ``print(0)``, backticks, ``lambda:``) is refused
  before it reaches Math-Verify, which would otherwise credit its last number.

Conventions (pinned in ``tests/test_equivalence_table.py``; the two switches are :class:`GradingOptions`)
------------------------------------------------------------------------------------------------------------
* Units: words and ``\\text{...}`` units after a number are dropped from the prediction and the gold
  alike, because GSM8K/MATH golds often omit them (MATH's ``_remove_right_units`` and Math-Verify's unit
  list do the same): ``5 cm`` == ``5`` == ``5\\text{ cm}``.  When BOTH carry a unit it must be the same one
  (``compare_units``, default on; spellings and plurals agree: ``5 cm`` == ``5 centimeters``, ``5 km`` !=
  ``5 m``: every other grader accepts that one, a false positive), and units are never converted
  (``50 mm`` != ``5 cm``).  Words in any script count
  (``42 Äpfel``, ``15 яблок``, ``42个``); letters that may be variables stay (``5x``, ``2 pi``, ``2π``,
  ``5m``: the one-letter unit ``m`` and ``in`` only when a space sets them apart, ``5 m``).
* Division by zero: an answer whose value is undefined (``1/0``, ``\\frac{2}{1-1}``, ``0/0``,
  ``\\infty - \\infty``) equals nothing, not even the same text (the worker decides, see
  :func:`lmgym.envs.grading.symbolic.is_undefined`).
* Clock times: two answers that both read ``H:MM`` (two-digit minutes, optional am/pm) compare as
  times: ``9:00`` == ``09:00``, ``9:00`` != ``12:00``, ``9:00 am`` != ``9:00 pm``.  Otherwise ``a:b``
  is a ratio (``3:4`` == ``6:8`` == 0.75), so a lone ``9:00`` (9/0) equals nothing.
* Lists vs thousands: ``1,234`` is one number (1234); a comma followed by a space separates list
  items, so ``1, 234`` is the list (1, 234) and ``3, 5`` is no decimal 3.5.  LaTeX's thousands marks
  ``1{,}234`` and ``11,\\! 111`` are thousands separators.
* List order: two bare comma lists compare in the written order (``unordered_lists``, default off), as
  MATH's ``is_equiv`` (a string comparison) and MARIO/ToRA's ``math_equal`` (element by element) do;
  Math-Verify, and so lighteval, sort both, which credits a reversed ordered answer.  A set in braces,
  ``\\pm`` and "x = 1 or x = 2" are sets in any order; a tuple is always ordered.
* A number gold accepts the one number of a short text of words, units or money (``1,000.99€``, ``USD 5``,
  "The cost is $5"), never a hedge (``5 or 6``, ``at least 5``) or a second number
  (:mod:`lmgym.envs.grading.number_in_text`); and a rounding of it: a prediction that is the gold rounded to four
  or more significant digits (``0.3333`` for 1/3), or an exact or two-places-finer prediction that a gold
  decimal of three or more significant digits rounds (``3.14159`` for 3.14).
* Clock ranges (``9:00-10:00``) compare as pairs of times.  An answer always equals itself, unless its
  value is undefined (``tests/test_grading_self_equality.py``).
"""

from __future__ import annotations

import atexit
import math
import os
import re
import unicodedata
from dataclasses import dataclass
from typing import NamedTuple

from lmgym.core.extras import require_extra
from lmgym.envs.extraction import extract_answer, gsm8k_gold
from lmgym.envs.grading.code_screen import looks_like_code
from lmgym.envs.grading.number_in_text import is_greek, sole_number
from lmgym.envs.grading.numbers import REL_TOL, PlainNumber, compare_numbers, is_number_literal, parse_number
from lmgym.envs.grading.symbolic import preload, serve
from lmgym.envs.grading.worker import CpuBoundedWorker
from lmgym.envs.safe_arith import MAX_ANSWER_CHARS, MAX_NESTING, closing_brace, max_nesting

__all__ = [
    "extract_answer", "gsm8k_gold", "normalize_answer", "answers_equal", "is_number_literal",
    "worker_cpu_seconds", "start_grading_worker", "GRADERS", "REL_TOL", "GradingOptions",
]


@dataclass(frozen=True)
class GradingOptions:
    """Conventions where graders differ; the defaults favour fewer false positives.

    Attributes:
        unordered_lists: compare two bare comma lists ("1, 2, 3" vs "3, 1, 2") as sets.  Default False:
            in the written order, as MATH's ``is_equiv`` (a string comparison) and MARIO/ToRA's
            ``math_equal`` (element by element) do; Math-Verify and lighteval (which uses it) sort
            both lists, which credits "(b, a)"-style answers whose order the question asked for.
            Braces (``\\{1, 2\\}``), ``\\pm`` and "x = 1 or x = 2" are sets whatever this says.
        compare_units: when BOTH answers carry a unit after the number, the units must name the same unit
            (``5 km`` != ``5 m``; ``5 cm`` == ``5 centimeters``).  Default True.  A unit on one side only
            is dropped, as every grader does (MATH's ``_remove_right_units``, Math-Verify's unit list):
            golds often omit it.  Units are never converted (``50 mm`` != ``5 cm``).
    """

    unordered_lists: bool = False
    compare_units: bool = True

    def __post_init__(self) -> None:
        for name in ("unordered_lists", "compare_units"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise ValueError(f"GradingOptions.{name} must be True or False; got {value!r}")


DEFAULT_OPTIONS = GradingOptions()
GRADERS = ("default", "math_verify")
MAX_MATH_VERIFY_CHARS = 20_000  # grader="math_verify" gets the raw text (it extracts itself)

# --------------------------------------------------------------------------
# normalisation (string only; every pattern linear)
# --------------------------------------------------------------------------

# Two plain integers (spaces around them allowed) are compared as ints, before any normalisation.
_PLAIN_INTEGER_RE = re.compile(r"[ \t\n]*-?\d{1,40}[ \t\n]*", re.ASCII)
# LaTeX thousands separators, read before the spacing below is removed: "1{,}234", "11,\\! 111" -> "1,234", "11,111".
_THOUSANDS_MARK_RE = re.compile(r"\{,\}|,\\!\s*")
# Removed from every answer, in this order: \left/\right, LaTeX spacing (not the "\\" of a row break followed by
# a space), degree marks.
_LATEX_NOISE_RES = (
    re.compile(r"\\(?:left|right)(?![A-Za-z])"),
    re.compile(r"(?<!\\)\\[!,;: ]|\\displaystyle"),
    re.compile(r"\^\s*(?:\{\s*)?\\circ\s*\}?|°"),  # no two adjacent \s* (quadratic on "^" + spaces)
)
# Rewritten once the dollar signs are gone, in this order: "\text{and}" -> ",", percent -> "%", \dfrac -> \frac.
_REWRITES = (
    (re.compile(r"\\text\{\s*(?:and|or)\s*\}"), ","),
    (re.compile(r"\\(?:text|mbox|mathrm)\{\s*(?:percent|percentage|pct)\s*\}"), "%"),
    (re.compile(r"\b(?:percent|percentage|pct)\b"), "%"),
    (re.compile(r"\\[dt]frac(?![A-Za-z])"), r"\\frac"),
)
_LEADING_ASSIGNMENT_RE = re.compile(r"^[A-Za-z]\s*=\s*(?=\S)")
# The one assignment of an answer to a Greek letter or a subscripted name: "\lambda = 3", "x_1 = 2", "a_{n} = 5".
_NAMED_ASSIGNMENT_RE = re.compile(
    r"^(?:[A-Za-z]_(?:\{[A-Za-z0-9]{1,3}\}|[A-Za-z0-9])|\\(?:alpha|beta|gamma|delta|epsilon|varepsilon|zeta|eta|theta"
    r"|kappa|lambda|mu|nu|xi|rho|sigma|tau|phi|varphi|chi|psi|omega))\s*=\s*(?=\S[^=]*$)"
)
# Environments whose rows are separate answers ("\begin{cases} x = 1 \\ y = 2 \end{cases}" -> "x = 1, y = 2").
_SYSTEM_ENV_RE = re.compile(r"\\begin\{(aligned|align\*?|cases|gathered|gather\*?|array)\}(?:\{[lcr| ]*\})?")
_ROW_BREAK_RE = re.compile(r"\\\\(?:\[[^\]\\]{0,20}\])?")  # a row break, optionally with its spacing: \\[2pt]
_ARRAY_RE = re.compile(r"\\(begin|end)\{(?:array|smallmatrix|matrix)\}(?:\{[lcr| ]*\})?")
# "918 1/2": a whole number and a proper fraction after a space (a mixed number, not 9181/2).
_SPACED_MIXED_RE = re.compile(r"(?<![-+\d])([-+]?\d+) (\d+)/(\d+)", re.ASCII)  # no restart inside a digit run
_WHITESPACE_RE = re.compile(r"\s+")
_SPACE_NOT_BETWEEN_LETTERS_RE = re.compile(r"(?<![A-Za-z]) | (?![A-Za-z])")
# Lookbehinds such as (?<!\d) keep a search from restarting inside a digit run (quadratic otherwise).
_TEXT_RE = re.compile(r"\\(?:text|mbox)\s*\{([^{}]*)\}(?:\s*\^\s*(?:\{\s*\d+\s*\}|\d))?")
_FORMAT_RE = re.compile(
    r"\\(?:textbf|mathrm|mathbf|textrm|textit|textnormal|textsf|texttt|mathit|mathsf|emph)\s*\{([^{}]*)\}")
_COMMA_NUMBER_RE = re.compile(r"-?[1-9]\d{0,2}(?:,\d{3})+(?:\.\d+)?%?", re.ASCII)
_DOUBLE_BACKSLASH_RE = re.compile(r"\\\\(?=[A-Za-z])")
# A number, then words (checked by _is_unit_word; any script): "10 weeks", "42 Äpfel", "15 яблок", "42个".
_NUMBER_WORDS_RE = re.compile(r"(?<![-+0-9.,/])([-+]?[0-9.,/]+%?)\s*([^\s0-9].*)", re.DOTALL)
_DECIMAL_COMMA_RE = re.compile(r"(?<!\d)[-+]?(\d+),(\d+)", re.ASCII)
_RATIO_RE = re.compile(r"(?<!\d)(\d+):(\d+)", re.ASCII)
# A clock time, after normalize_answer: "9:00", "09:30", "9:30pm", "9:30a.m." (two-digit minutes 00-59).
_CLOCK_TIME_RE = re.compile(r"(\d{1,2}):([0-5]\d)((?:[ap]\.?m\.?)?)", re.ASCII | re.IGNORECASE)
_TIME_RANGE_DASHES = "-–—"  # "9:00-10:00", "9:00–10:00": a range of two clock times
_MATH_WORDS = frozenset(
    "pi sin cos tan sec csc cot sinh cosh tanh arcsin arccos arctan log ln exp sqrt mod deg i e or and".split()
)
_SHORT_UNITS = frozenset("cm mm km kg mg ml ft lb lbs oz hr hrs yd mi sq rs".split())
_SPACED_UNITS = frozenset("m in".split())  # units only when a space sets them apart ("5 m", not "5m")


# Spellings of one unit, for comparing the units of two answers (GradingOptions.compare_units); a plural "s" is
# dropped first ("meters" -> "meter").  Units are never converted: "mm" and "cm" stay different.
_UNIT_ALIASES = {
    "centimeter": "cm", "centimetre": "cm", "millimeter": "mm", "millimetre": "mm", "kilometer": "km",
    "kilometre": "km", "meter": "m", "metre": "m", "kilogram": "kg", "gram": "g", "milligram": "mg",
    "liter": "l", "litre": "l", "milliliter": "ml", "millilitre": "ml", "inche": "in", "inch": "in",
    "foot": "ft", "feet": "ft", "yard": "yd", "mile": "mi", "pound": "lb", "ounce": "oz", "hour": "h",
    "hr": "h", "minute": "min", "second": "s", "sec": "s", "degree": "deg", "dollar": "usd", "cent": "cent",
    "hrs": "h", "lbs": "lb", "mins": "min", "secs": "s", "mph": "mi h", "kph": "km h", "kmh": "km h",
    # not compared: "per" ("km per h" is "km/h"), powers (the "^2" of "cm^2" is dropped too), "units"
    "per": "", "square": "", "sq": "", "cubic": "", "cu": "", "unit": "",
}


def _unit_key(words: list[str]) -> tuple[str, ...]:
    """A unit's canonical words: lower case, no plural "s", one spelling per unit ("Meters" -> "m")."""
    key = []
    for word in words:
        w = word.lower().strip(".")
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        key += _UNIT_ALIASES.get(w, w).split()
    return tuple(key)


def _is_unit_word(word: str, spaced: bool, alone: bool) -> bool:
    """May ``word`` after a number be dropped as a unit or a noun ("weeks", "cm", "Äpfel", "个")?

    ASCII words: a known short unit, or three letters or more with a vowel, and no math word
    (``2 pi``, ``5x`` and ``2 xy`` keep their letters); ``m`` and ``in`` only alone and after a space
    (``5 m``, not ``5m``).  Other scripts: letters and their marks, but no Greek (``2π``).
    """
    if word.isascii():
        lw = word.lower()
        if not word.isalpha() or lw in _MATH_WORDS:
            return False
        if spaced and alone and lw in _SPACED_UNITS:
            return True
        return lw in _SHORT_UNITS or (len(word) >= 3 and any(c in "aeiouy" for c in lw))
    return all(unicodedata.category(c)[0] in "LM" and not is_greek(c) for c in word)


def _strip_words_after_number(s: str) -> tuple[str, tuple[str, ...]]:
    """``10 weeks`` -> ``10``; ``5 sq cm`` -> ``5``; ``42 Äpfel`` -> ``42``; ``60 km/h`` -> ``60``; keeps ``2 pi``,
    ``5x``, ``2 xy``, ``2π``.  Also returns the dropped words (the unit)."""
    m = _NUMBER_WORDS_RE.fullmatch(s)
    if m is None:
        return s, ()
    first, *per = m.group(2).split("/")  # "km/h": the words after a "/" may be short ("h", "s")
    words = [w for part in [first, *per] for w in part.replace("^2", " ").replace("^3", " ").replace(".", " ").split()]
    head = first.replace("^2", " ").replace("^3", " ").replace(".", " ").split()
    spaced = m.start(2) > m.end(1)
    per_ok = all(w.isascii() and w.isalpha() and len(w) <= 3 and w.lower() not in _MATH_WORDS
                 for p in per for w in p.split())
    if head and per_ok and all(_is_unit_word(w, spaced, len(head) == 1) for w in head):
        return m.group(1), tuple(words)
    return s, ()


def normalize_answer(answer: str) -> str:
    """Canonical string form of an answer (no evaluation; linear time).

    Removes ``$``, ``\\text{...}`` units and words after a number (``10 weeks``), ``\\left``/``\\right``,
    LaTeX spacing, degree marks, a leading ``x =`` (also ``\\lambda =``, ``x_1 =``), trailing periods,
    thousands separators (``1,234``, ``1{,}234``, ``1,\\!234``) and spaces; fixes double-escaped commands
    (``\\\\frac``, a double-escaped matrix); maps ``\\dfrac``/``\\tfrac`` to ``\\frac``, ``\\%`` and the word
    "percent" to ``%``, the unicode minus to ``-``, ``918 1/2`` to the mixed number ``918\\frac{1}{2}``, an
    ``array`` or ``smallmatrix`` to a ``pmatrix`` and the rows of ``cases``/``aligned`` to a list.  A comma
    followed by a space separates list items, never thousands: ``1,234`` -> ``1234`` but ``1, 234`` ->
    ``1,234`` (a list of two).
    """
    return _normalize(answer).text


class _Normal(NamedTuple):
    """A normalised answer: its text, whether a comma followed by a space was seen (that comma makes a list,
    so the text must not be read as one number with a decimal comma: ``3, 5`` is no 3.5), and the unit words
    dropped after its number (``("km",)`` for ``5 km``)."""

    text: str
    list_commas: bool
    unit: tuple[str, ...]


def _environment_rows(s: str) -> str:
    """``\\begin{cases} x = 1 \\\\ y = 2 \\end{cases}`` -> ``x = 1, y = 2`` (also aligned, gathered, a one-column
    array of equations); a matrix-like ``array``/``smallmatrix``/``matrix`` becomes a ``pmatrix``."""
    m = _SYSTEM_ENV_RE.match(s)
    end = f"\\end{{{m.group(1)}}}" if m else ""
    if m and s.endswith(end) and (m.group(1) != "array" or "=" in s):
        rows = _ROW_BREAK_RE.split(s[m.end() : len(s) - len(end)])
        return ", ".join(row.replace("&", "").strip() for row in rows if row.strip())
    return _ARRAY_RE.sub(lambda a: f"\\{a.group(1)}{{pmatrix}}", s)


def _normalize(answer: str) -> _Normal:
    """See :func:`normalize_answer`; also says whether list commas were seen and which unit was dropped."""
    s = answer.strip().replace("−", "-").replace("~", " ")  # "~": LaTeX's unbreakable space
    if "\\\\begin{" in s:
        s = s.replace("\\\\", "\\")  # a double-escaped environment: every backslash was doubled
    elif "matrix" not in s:
        s = _DOUBLE_BACKSLASH_RE.sub(r"\\", s)
    if s.startswith("\\boxed{") and closing_brace(s, len("\\boxed")) == len(s) - 1:
        s = s[len("\\boxed{") : -1]  # one box around everything (several boxes are left to the parser)
    s = _THOUSANDS_MARK_RE.sub(",", s)
    for noise in _LATEX_NOISE_RES:
        s = noise.sub("", s)
    s = _environment_rows(s.strip())
    s = s.replace("\\%", "%").replace("\\$", "").replace("$", "")
    for pattern, replacement in _REWRITES:
        s = pattern.sub(replacement, s)
    units = [m.group(1) for m in _TEXT_RE.finditer(s)]
    without_units = _TEXT_RE.sub("", s)
    s, units = (without_units, units) if without_units.strip() else (_TEXT_RE.sub(r"\1", s), [])
    s = _FORMAT_RE.sub(r"\1", s)
    s = _LEADING_ASSIGNMENT_RE.sub("", s.strip())
    s = _NAMED_ASSIGNMENT_RE.sub("", s)
    s = _WHITESPACE_RE.sub(" ", s).strip()
    list_commas = ", " in s
    s, words = _strip_words_after_number(s.rstrip("."))
    s = _SPACED_MIXED_RE.sub(r"\1\\frac{\2}{\3}", s) if _SPACED_MIXED_RE.fullmatch(s) else s
    s = _SPACE_NOT_BETWEEN_LETTERS_RE.sub("", s)  # keep spaces only between letters
    s = s.rstrip(".")
    if not list_commas and _COMMA_NUMBER_RE.fullmatch(s):
        s = s.replace(",", "")
    return _Normal(s, list_commas, _unit_key(" ".join(units).split() + list(words)))


# --------------------------------------------------------------------------
# equivalence
# --------------------------------------------------------------------------

_WORKER = CpuBoundedWorker(serve, preload)
atexit.register(_WORKER.stop)
os.register_at_fork(after_in_child=_WORKER._forget)


def start_grading_worker() -> bool:
    """Fork the grading worker now rather than at the first symbolic comparison (True once it is ready)."""
    return _WORKER.start()


def worker_cpu_seconds() -> float:
    """CPU seconds the grading worker has spent on requests so far (for CPU-time measurements)."""
    return _WORKER.total_request_cpu


def _as_plain_number(s: str, list_commas: bool = False) -> str:
    """Forms of a number used only against a single-number gold: ``3,5`` -> ``3.5`` (a decimal comma;
    ``1,234`` stays a thousands separator; none where ``list_commas``: "3, 5" was written), the ratio
    ``3:4`` -> ``3/4``, ``2=x`` -> ``2``."""
    m = None if list_commas else _DECIMAL_COMMA_RE.fullmatch(s)
    if m is not None and (len(m.group(2)) != 3 or m.group(1) == "0"):
        return s.replace(",", ".")
    m = _RATIO_RE.fullmatch(s)
    if m is not None:
        return f"{m.group(1)}/{m.group(2)}"
    if s.count("=") == 1:
        lhs, rhs = s.split("=")
        if len(rhs) == 1 and rhs.isascii() and rhs.isalpha():
            return lhs
    return s


def _clock_time(s: str) -> tuple[int, int, str] | None:
    """``(hour, minute, am/pm marker)`` of a normalised clock time ("9:00", "09:00", "9:30pm"), else None."""
    m = _CLOCK_TIME_RE.fullmatch(s)
    if m is None:
        return None
    return int(m.group(1)), int(m.group(2)), m.group(3).replace(".", "").lower()


def _clock_times(s: str) -> tuple[tuple[int, int, str], ...] | None:
    """The clock time of ``s``, or the two of a range ("9:00-10:00", "9:00–10:00"), as a tuple; else None."""
    for dash in _TIME_RANGE_DASHES:
        if s.count(dash) == 1:
            start, end = (_clock_time(part) for part in s.split(dash))
            return (start, end) if start is not None and end is not None else None
    time = _clock_time(s)
    return None if time is None else (time,)


def _plain_number_of(predicted: str, normal: _Normal) -> PlainNumber | None:
    """The prediction as a plain number: written as one (after ``_as_plain_number``: ``3,5``, ``3:4``), or the
    one number of a short text of words, units or money (``1,000.99€``, ``USD 5``; :func:`sole_number`)."""
    number = parse_number(_as_plain_number(normal.text, normal.list_commas))
    if number is not None:
        return number
    stated = sole_number(_as_words(predicted))
    if stated is None:
        return None
    stated_normal = _normalize(stated)
    return parse_number(_as_plain_number(stated_normal.text, stated_normal.list_commas))


def _as_words(text: str) -> str:
    """Text with its LaTeX text markup and spacing turned into plain words and spaces (for :func:`sole_number`):
    ``\\text{1,000.99 euros}`` -> ``1,000.99 euros``, ``\\$5`` -> ``$5``, ``1{,}000\\,€`` -> ``1,000 €``."""
    text = _THOUSANDS_MARK_RE.sub(",", text.replace("\\$", "$").replace("\\%", "%"))
    text = _FORMAT_RE.sub(r" \1 ", _TEXT_RE.sub(r" \1 ", text))
    for noise in _LATEX_NOISE_RES:
        text = noise.sub(" ", text)
    return text.replace("$", " $ ").strip()


def _is_bare_list(text: str) -> bool:
    """A list written with commas outside any bracket ("1, 2, 3", "(1,2),(3,4)"), not a set ("\\{1, 2\\}")."""
    depth = 0
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            return True
    return False


def _for_worker(s: str, list_commas: bool) -> str:
    """The worker's form of a normalised answer: list commas get their space back ("1, 234"), since
    the LaTeX parser reads "1,234" as one thousand two hundred thirty-four."""
    return s.replace(",", ", ") if list_commas else s


def _same_text_is_equal(s: str, budget: float) -> bool:
    """An answer against the very same (normalised) text: equal, unless the worker finds its value
    undefined (``1/0``, ``\\infty - \\infty``: equal to nothing, not even itself).  Text the worker
    cannot read, or has no budget for, stays equal to itself."""
    if budget <= 0 or max_nesting(s) > MAX_NESTING:
        return True
    return _WORKER.call(("undefined", _split_percent(s)[0]), budget) is not True


def _split_percent(s: str) -> tuple[str, bool]:
    return (s[:-1], True) if s.endswith("%") else (s, False)


def answers_equal(
    predicted: str | None, gold: str, timeout: float = 1.0, *, grader: str = "default",
    options: GradingOptions | None = None,
) -> bool:
    """True if ``predicted`` is equivalent to ``gold``. Never raises on any answer text.

    Plain numbers compare exactly (``1000001`` != ``1000000``; ``0.5`` == ``1/2``; mixed numbers
    ``918\\frac{1}{2}`` == 918.5).  A relative tolerance ``REL_TOL`` (1e-6) applies only when the gold
    is itself inexact: a decimal written with a fractional part (``0.333333``) or an irrational
    number (``\\pi``, ``\\sqrt{2}``).  If exactly one side ends in ``%``, "50%" equals both 50 and 0.5.
    A number gold needs a written-out number (``10 + 11`` is not 21).  Otherwise the answers are
    compared as LaTeX in the worker: expressions symbolically, sets in any order, tuples in order,
    intervals with their bracket types, equations/assignments (``x=2`` vs ``2``), inequalities
    (``x \\le 5`` vs ``5 \\ge x``, or as an interval), matrices elementwise.

    A gold that is a plain number also accepts the one number of a short text of words, units or money
    (``1,000.99€``, ``The cost is $5``; not ``5 or 6``, ``at least 5``), and rounding: a prediction that is
    the gold rounded to four or more significant digits (``0.3333`` for 1/3), or a finer prediction that a gold
    decimal of three or more significant digits rounds (``3.14159`` for 3.14).  Clock times and ranges
    compare as times (``9:00-10:00``).  ``options`` (:class:`GradingOptions`): bare lists in written order
    unless ``unordered_lists``; with ``compare_units``, two answers that both carry units need the same unit.

    ``timeout`` is a CPU-time budget in seconds for the worker (see the module docstring).
    ``grader``: "default", or "math_verify" (Math-Verify's parse + verify on the raw strings; its
    expression parsing calls sympy ``parse_expr``, i.e. ``eval``, on model text; it needs the
    [math-verify] extra, else MissingExtraError names the pip command).  An unknown grader name raises
    ValueError.
    """
    if grader not in GRADERS:
        raise ValueError(f"unknown grader {grader!r}: expected one of {', '.join(GRADERS)}")
    if options is not None and not isinstance(options, GradingOptions):
        raise ValueError(f"options must be a GradingOptions or None; got {type(options).__name__}")
    options = options or DEFAULT_OPTIONS
    if grader == "math_verify":
        require_extra("math_verify", 'grader="math_verify"')
    try:
        if not isinstance(predicted, str) or not isinstance(gold, str):
            return False
        budget = float(timeout)
        budget = budget if math.isfinite(budget) and budget > 0 else 0.0
        if grader == "math_verify":
            if len(predicted) > MAX_MATH_VERIFY_CHARS or len(gold) > MAX_MATH_VERIFY_CHARS:
                return False
            if looks_like_code(predicted):
                return False  # Math-Verify would take the last number of "...) or 0"
            return _WORKER.call(("math_verify", (predicted, gold)), budget) is True
        if len(predicted) > MAX_ANSWER_CHARS or len(gold) > MAX_ANSWER_CHARS:
            return False
        if _PLAIN_INTEGER_RE.fullmatch(predicted) and _PLAIN_INTEGER_RE.fullmatch(gold):
            return int(predicted) == int(gold)  # two plain integers: the verdict below, without normalising
        pred_normal, gold_normal = _normalize(predicted), _normalize(gold)
        (a, a_list, a_unit), (b, b_list, b_unit) = pred_normal, gold_normal
        if not a or not b:
            return not a and not b and predicted.strip() == gold.strip() != ""  # "\\," is still itself
        if options.compare_units and a_unit and b_unit and a_unit != b_unit:
            return False  # "5 km" vs "5 m": both name a unit, and not the same one
        a_time, b_time = _clock_times(a), _clock_times(b)
        if a_time is not None and b_time is not None:
            return a_time == b_time  # clock times: "9:00" == "09:00", "9:00" != "12:00", "9:00-10:00"
        gold_number = parse_number(b)
        if gold_number is not None:
            predicted_number = _plain_number_of(predicted, pred_normal)
            return predicted_number is not None and compare_numbers(predicted_number, gold_number)
        if a == b:
            return _same_text_is_equal(_for_worker(a, a_list), budget)
        if max_nesting(a) > MAX_NESTING or max_nesting(b) > MAX_NESTING:
            return False
        (a, a_pct), (b, b_pct) = _split_percent(_for_worker(a, a_list)), _split_percent(_for_worker(b, b_list))
        if not a or not b or budget <= 0:
            return False
        in_order = not options.unordered_lists and _is_bare_list(a) and _is_bare_list(b)
        return _WORKER.call(("default", (a, b, a_pct, b_pct, in_order)), budget) is True
    except Exception:  # noqa: BLE001 - never raise on untrusted input
        return False
