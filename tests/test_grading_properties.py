"""Property-based tests (hypothesis, derandomized) of answers_equal and normalize_answer.

Hostile inputs included: power towers, \\frac and bracket nests up to 1000 deep, 1 MB strings,
unicode digits, dunder payloads (a marker file must never appear), and ReDoS shapes run against
every regex of lmgym.envs.answers, lmgym.envs.safe_arith and lmgym.envs.grading.  Each call must stay under 0.5 s of
CPU (this process + the grading worker; answers_equal runs with a 0.3 s CPU budget), return a
bool / str and raise nothing.  Example counts are chosen so that each property sees >= 2,000
generated inputs over this file (counted and asserted at the end).
"""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lmgym.envs.answers
import lmgym.envs.grading.code_screen
import lmgym.envs.grading.number_in_text
import lmgym.envs.grading.numbers
import lmgym.envs.grading.symbolic
import lmgym.envs.safe_arith
from lmgym.envs.answers import answers_equal, normalize_answer
from tests.cpu_timing import RUNAWAY_BOUND_S, cpu_call_within
from tests.tiers import slow

pytestmark = slow  # the slow tier (tests/tiers.py): thousands of generated inputs through the grading worker

BUDGET = 0.3  # CPU seconds given to the worker per answers_equal call
# what one call may cost in all (tests/cpu_timing.py); judged by cpu_call_within: remeasuring stops at the first run
# under it (the same verdicts)
CPU_LIMIT = RUNAWAY_BOUND_S
MARKER = f"/tmp/rlgym_pwned_{os.getpid()}"
COUNTS = {"answers_equal": 0, "normalize_answer": 0}
WORKER_REQUESTS = {"at_start": 0}
MAX_CPU = {"answers_equal": 0.0, "normalize_answer": 0.0}


def fuzz_settings(n: int) -> settings:
    return settings(
        max_examples=n, deadline=None, derandomize=True, database=None,
        suppress_health_check=list(HealthCheck),
    )


# --------------------------------------------------------------------------
# strategies
# --------------------------------------------------------------------------

UNICODE_DIGITS = "٠١٢٣٤٥٦٧٨٩०१२३४५६७८९０１２３４５６７８９𝟏𝟐"
ALPHABET = "0123456789+-*/^()[]{}\\,.=<>%$ xyzeipabc_:;!|&'\"" + UNICODE_DIGITS + "−π√×·÷°"
COMMANDS = [r"\frac", r"\dfrac", r"\sqrt", r"\pi", r"\cdot", r"\left(", r"\right)", r"\text{", r"\boxed{",
            r"\sin", r"\ln", r"\log_", r"\infty", r"\le", r"\cup", r"\{", r"\}", r"\%", r"\\", r"\begin{pmatrix}",
            r"\end{pmatrix}", "&", r"\mathbb{R}", r"\tfrac", r"\circ", r"\!", r"\,", r"\pm", r"\in", r"\emptyset"]

PAYLOADS = [
    f"__import__('os').system('touch {MARKER}')",
    f"__import__('os').system('touch {MARKER}') or 0",
    f"exec(\"open('{MARKER}', 'w')\")",
    f"eval(\"__import__('os').system('touch {MARKER}')\")",
    f"open('{MARKER}', 'w').write('x')",
    f"\\text{{__import__('os').system('touch {MARKER}')}}",
    f"$__import__('os').system('touch {MARKER}')$",
    "().__class__.__bases__[0].__subclasses__()",
    "lambda: __import__('os')",
    "Symbol('x').__class__.__init__.__globals__",
    f"x = __import__('os').system('touch {MARKER}')",
]

numbers = st.one_of(
    st.integers(-10**12, 10**12).map(str),
    st.fractions(max_denominator=1000).map(str),
    st.decimals(allow_nan=False, allow_infinity=False, places=4).map(str),
    st.tuples(st.integers(0, 99), st.integers(1, 9), st.integers(10, 20)).map(
        lambda t: rf"{t[0]}\frac{{{t[1]}}}{{{t[2]}}}"),
    st.integers(0, 1000).map(lambda n: f"{n}%"),
    st.integers(1000, 10**9).map(lambda n: f"{n:,}"),
)
towers = st.tuples(st.sampled_from(["9", "99", "x", "2", "10"]), st.integers(2, 12), st.sampled_from(["^", "**"]),
                   st.booleans()).map(lambda t: (t[2] + "{").join([t[0]] * t[1]) + "}" * (t[1] - 1) if t[3]
                                      else t[2].join([t[0]] * t[1]))
nests = st.tuples(st.sampled_from([(r"\frac{", "}{2}"), ("(", ")"), ("{", "}"), ("[", "]"), (r"\sqrt{", "}"),
                                   ("x^{", "}"), (r"\left(", r"\right)"), (r"\boxed{", "}")]),
                  st.integers(1, 1000), st.sampled_from(["1", "x", "", "9^9"]), st.booleans()).map(
    lambda t: t[0][0] * t[1] + t[2] + (t[0][1] * t[1] if t[3] else ""))
big = st.tuples(st.sampled_from(["a", "1", " ", "(", "\\frac{", "1,", "x+", "٣", "$.", "\\text{", "^ "]),
                st.sampled_from([1_000, 100_000, 1_000_000])).map(lambda t: (t[0] * t[1])[:1_000_000])
latex_pieces = st.lists(st.one_of(st.sampled_from(COMMANDS), st.text(ALPHABET, max_size=6), numbers),
                        max_size=8).map("".join)
small_text = st.text(ALPHABET, max_size=40)

# ReDoS shapes: a unit repeated many times between a prefix and a tail that makes the match fail late.
REDOS_UNITS = [" ", "\t", "1", "1,", "1,234", ",123", "1.", ".1", "1e", "0", "a", "a ", "x = ", "^", "^ ", "{", "}",
               "\\text{", "\\text ", "\\frac1", "\\\\", "_{", "%", "$", "(", "-", "e-", "1/", "1:", "\\left", "° ",
               "\\circ", "percent ", "i", "\\!", "\\ ", "x=", "=", "٣", "\\mbox{a}"]
REDOS_PREFIXES = ["", "1", "x", "\\text{", "^", "-", "1 ", "\\frac", "a="]
REDOS_TAILS = ["", "!", "x", "}", "\\", "=", " #", "e", "%!", "\n"]
redos = st.tuples(st.sampled_from(REDOS_PREFIXES), st.sampled_from(REDOS_UNITS), st.integers(2_000, 30_000),
                  st.sampled_from(REDOS_TAILS)).map(lambda t: t[0] + t[1] * t[2] + t[3])

hostile = st.one_of(small_text, latex_pieces, numbers, towers, nests, big, redos, st.sampled_from(PAYLOADS),
                    st.text(max_size=30))
golds = st.one_of(numbers, st.sampled_from(["x", "x^2+2x+1", r"\frac{\sqrt{2}}{2}", r"\pi", "(1,2)", r"\{1,2\}",
                                            r"x \le 3", "[0,1)", r"\begin{pmatrix}1\\2\end{pmatrix}", "y=2x+1",
                                            "0", "21", "1000000", r"918\frac{1}{2}", "33.5\\%"]))


# --------------------------------------------------------------------------
# checks
# --------------------------------------------------------------------------


def check_equal(predicted, gold) -> None:
    COUNTS["answers_equal"] += 1
    verdict, cpu = cpu_call_within(CPU_LIMIT, answers_equal, predicted, gold, timeout=BUDGET)
    assert isinstance(verdict, bool)
    MAX_CPU["answers_equal"] = max(MAX_CPU["answers_equal"], cpu)
    assert cpu < CPU_LIMIT, (cpu, str(predicted)[:80], str(gold)[:80])
    assert not os.path.exists(MARKER)


def check_normalize(text) -> None:
    COUNTS["normalize_answer"] += 1
    out, cpu = cpu_call_within(CPU_LIMIT, normalize_answer, text)
    assert isinstance(out, str)
    MAX_CPU["normalize_answer"] = max(MAX_CPU["normalize_answer"], cpu)
    assert cpu < CPU_LIMIT, (cpu, text[:80])


@pytest.fixture(scope="module", autouse=True)
def _marker_never_appears():
    if os.path.exists(MARKER):
        os.remove(MARKER)
    WORKER_REQUESTS["at_start"] = lmgym.envs.answers._WORKER.requests
    yield
    assert not os.path.exists(MARKER), "a payload was executed"


@fuzz_settings(700)
@given(hostile, golds)
def test_answers_equal_hostile_prediction(predicted, gold):
    check_equal(predicted, gold)


@fuzz_settings(500)
@given(st.one_of(numbers, latex_pieces, small_text, towers), hostile)
def test_answers_equal_hostile_gold(predicted, gold):
    check_equal(predicted, gold)


SYMBOLIC_GOLDS = ["x^2+2x+1", r"\frac{\sqrt{2}}{2}", r"\pi", "(1,2)", r"\{1,2\}", r"x \le 3", "[0,1)",
                  r"\begin{pmatrix}1\\2\end{pmatrix}", "y=2x+1", r"\sin x", "2i+1", r"\frac{x}{x+1}"]


@fuzz_settings(500)
@given(st.one_of(latex_pieces, towers, nests, small_text, st.sampled_from(PAYLOADS)), st.sampled_from(SYMBOLIC_GOLDS))
def test_answers_equal_hostile_prediction_symbolic_gold(predicted, gold):
    check_equal(predicted, gold)  # the gold is no plain number: these reach the worker


@fuzz_settings(250)
@given(st.sampled_from(PAYLOADS), st.sampled_from(["0", "1", "x", PAYLOADS[0], r"\frac12"]), st.booleans())
def test_answers_equal_payloads_never_run(payload, other, swap):
    check_equal(*((other, payload) if swap else (payload, other)))


@fuzz_settings(150)
@given(st.one_of(numbers, towers, small_text))
def test_answers_equal_is_reflexive_on_sane_inputs(answer):
    COUNTS["answers_equal"] += 1
    verdict, cpu = cpu_call_within(CPU_LIMIT, answers_equal, answer, answer, timeout=BUDGET)
    assert cpu < CPU_LIMIT
    if verdict is not bool(answer.strip()):  # identical non-blank answers are equal, unless undefined (1/0)
        lmgym.envs.grading.symbolic.preload()
        assert lmgym.envs.grading.symbolic.parses_undefined(normalize_answer(answer)), answer


@fuzz_settings(200)
@given(st.integers(-10**15, 10**15), st.integers(-10**15, 10**15))
def test_integers_compare_exactly(a, b):
    COUNTS["answers_equal"] += 1
    assert answers_equal(str(a), str(b)) is (a == b)
    assert answers_equal(f"{a:,}", str(b)) is (a == b)


@fuzz_settings(1800)
@given(hostile)
def test_normalize_answer_hostile(text):
    check_normalize(text)


@fuzz_settings(300)
@given(st.sampled_from(PAYLOADS + ["9^9^9^9", "1" * 1_000_000, "(" * 1000]), st.text(ALPHABET, max_size=20))
def test_normalize_answer_payloads(payload, noise):
    check_normalize(noise + payload)


# --------------------------------------------------------------------------
# every regex against ReDoS shapes
# --------------------------------------------------------------------------

MODULES = [lmgym.envs.answers, lmgym.envs.safe_arith, lmgym.envs.grading.numbers, lmgym.envs.grading.symbolic,
           lmgym.envs.grading.code_screen, lmgym.envs.grading.number_in_text]


def module_patterns(module) -> list[tuple[str, re.Pattern]]:
    """A module's regexes: module-level patterns and those in module-level tables (tuples of patterns or of
    (pattern, replacement) pairs)."""
    found = []
    for name, value in vars(module).items():
        if isinstance(value, re.Pattern):
            found.append((name, value))
        elif isinstance(value, tuple):
            for i, item in enumerate(value):
                found += [(f"{name}[{i}]", p) for p in (item if isinstance(item, tuple) else (item,))
                          if isinstance(p, re.Pattern)]
    return found


PATTERNS = [(m.__name__, name, p) for m in MODULES for name, p in module_patterns(m)]


def test_no_inline_regexes():
    """All regexes are module-level patterns, so the ReDoS test below sees every one of them."""
    inline = re.compile(r"\bre\.(?:sub|subn|match|search|fullmatch|findall|finditer|split)\(")
    for module in MODULES:
        with open(module.__file__, encoding="utf-8") as f:
            assert not inline.search(f.read()), module.__name__
    assert len(PATTERNS) >= 25


@fuzz_settings(60)
@given(redos)
def test_every_regex_is_linear_on_redos_shapes(text):
    for module, name, pattern in PATTERNS:
        _, spent = cpu_call_within(CPU_LIMIT,
                                   lambda p, t: (p.search(t), p.match(t), p.fullmatch(t), p.sub("", t[:10_000])),
                                   pattern, text)
        assert spent < CPU_LIMIT, f"{module}.{name} is slow on {text[:40]!r}..."


@pytest.mark.parametrize("unit", REDOS_UNITS)
def test_every_regex_is_linear_on_each_repeated_unit(unit):
    for text in (unit * 20_000 + "!", "1" + unit * 20_000 + "\\"):
        for module, name, pattern in PATTERNS:
            _, spent = cpu_call_within(CPU_LIMIT, lambda p, t: (p.search(t), p.fullmatch(t)), pattern, text)
            assert spent < CPU_LIMIT, f"{module}.{name} is slow on {unit!r} * 20000"


def test_fuzz_counts(capsys):
    """Runs last in this file: each property saw at least 2,000 generated inputs."""
    with capsys.disabled():
        print(f"\nfuzz inputs: {COUNTS}; reached the grading worker: "
              f"{lmgym.envs.answers._WORKER.requests - WORKER_REQUESTS['at_start']}; max CPU s: {MAX_CPU}")
    assert COUNTS["answers_equal"] >= 2000, COUNTS
    assert COUNTS["normalize_answer"] >= 2000, COUNTS
