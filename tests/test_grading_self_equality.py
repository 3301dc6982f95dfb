"""An answer always equals itself: a hypothesis property over the grader's whole input space.

The graded inputs, precisely: every string ``y = extract_answer(x)`` that is not None and at most
``MAX_ANSWER_CHARS`` long (longer answers are never parsed and are unequal), where ``x`` is a model
output built from numbers, fractions, percentages, mixed numbers, money, units, clock times and
ranges, lists, sets, tuples, intervals, relations, matrices, LaTeX fragments and free text, wrapped as
a model writes a final answer (``\\boxed{}``, ``####``, "The answer is ...", a bare last line).  For
each, ``answers_equal(y, y)`` is True unless ``y``'s value is undefined (it divides by zero or is an
indeterminate form: ``1/0``, ``\\infty - \\infty``), the one documented exception.  Bounded:
derandomized, ``max_examples`` per strategy, no deadline, a 0.3 s CPU budget per call.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lmgym.envs.answers import answers_equal, normalize_answer
from lmgym.envs.extraction import extract_answer
from lmgym.envs.grading.symbolic import parses_undefined, preload
from lmgym.envs.safe_arith import MAX_ANSWER_CHARS
from tests.tiers import slow

pytestmark = slow  # the slow tier (tests/tiers.py): generated inputs through the grading worker

BUDGET = 0.3


def bounded(n: int) -> settings:
    return settings(max_examples=n, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


ints = st.integers(-10**9, 10**9)
numbers = st.one_of(
    ints.map(str),
    ints.map(lambda n: f"{n:,}"),
    ints.map(lambda n: f"{n:,}".replace(",", "{,}")),
    ints.map(lambda n: f"{n:,}".replace(",", ",\\! ")),
    st.fractions(max_denominator=50).map(str),
    st.decimals(allow_nan=False, allow_infinity=False, places=3).map(str),
    st.tuples(st.integers(0, 999), st.integers(1, 8), st.integers(9, 12)).map(
        lambda t: f"{t[0]}\\frac{{{t[1]}}}{{{t[2]}}}"),
    st.tuples(st.integers(0, 999), st.integers(1, 8), st.integers(9, 12)).map(lambda t: f"{t[0]} {t[1]}/{t[2]}"),
    st.integers(0, 500).map(lambda n: f"{n}\\%"),
    st.tuples(st.integers(0, 99), st.integers(0, 99)).map(lambda t: f"{t[0]},{t[1]}"),  # decimal comma
)
money = st.tuples(st.sampled_from(["$", "\\$", "€", "£", "USD ", "Rs. ", ""]), numbers,
                  st.sampled_from(["", "€", " dollars", " USD"])).map("".join)
units = st.tuples(numbers, st.sampled_from([" cm", " km/h", "\\text{ m}^2", " apples", " Äpfel", "个", "^\\circ",
                                            "\\,\\mathrm{mm}", " hours", " m", " sq ft"])).map("".join)
times = st.tuples(st.integers(0, 23), st.integers(0, 59), st.sampled_from(["", " am", "pm", " p.m."])).map(
    lambda t: f"{t[0]}:{t[1]:02d}{t[2]}")
time_ranges = st.tuples(times, st.sampled_from(["-", "–", " - "]), times).map("".join)
items = st.one_of(numbers, st.sampled_from(["x", "\\sqrt{2}", "-\\pi", "\\frac{a}{b}", "2i"]))
brackets = st.sampled_from([("", ""), ("(", ")"), ("\\{", "\\}"), ("[", "]"), ("\\left(", "\\right)")])
collections = st.tuples(st.lists(items, min_size=1, max_size=4), st.sampled_from([", ", ","]), brackets).map(
    lambda t: t[2][0] + t[1].join(t[0]) + t[2][1])
intervals = st.tuples(st.sampled_from(["(", "["]), items, items, st.sampled_from([")", "]"])).map(
    lambda t: f"{t[0]}{t[1]}, {t[2]}{t[3]}")
relations = st.tuples(st.sampled_from(["x", "\\lambda", "x_1", "a_{n}", "y"]),
                      st.sampled_from(["=", "<", "\\le", "\\geq", "\\in"]), st.one_of(items, intervals)).map(" ".join)
matrices = st.lists(st.lists(items, min_size=1, max_size=2), min_size=1, max_size=2).map(
    lambda rows: "\\begin{pmatrix}" + " \\\\ ".join(" & ".join(r) for r in rows) + "\\end{pmatrix}")
COMMANDS = ["\\frac", "\\sqrt", "\\pi", "\\cdot", "\\left(", "\\right)", "\\text{", "\\infty", "\\le", "\\cup",
            "\\{", "\\}", "\\%", "\\\\", "&", "\\!", "\\,", "\\pm", "\\in", "^", "_", "{", "}", ":", "/", "=", "0"]
latex = st.lists(st.one_of(st.sampled_from(COMMANDS), st.text("0123456789xyab+-*/(),. ", max_size=5), numbers),
                 max_size=6).map("".join)
answers = st.one_of(numbers, money, units, times, time_ranges, collections, intervals, relations, matrices, latex,
                    st.text(max_size=20))
wrapped = st.tuples(answers, st.sampled_from(["\\boxed{%s}", "#### %s", "The answer is %s.", "The answer is $%s$.",
                                              "So we get\n%s", "%s"])).map(lambda t: t[1].replace("%s", t[0]))


def check_self_equal(text: str) -> None:
    answer = extract_answer(text)
    if answer is None or len(answer) > MAX_ANSWER_CHARS:
        return  # not a graded input (see the module docstring)
    if answers_equal(answer, answer, timeout=BUDGET):
        return
    assert parses_undefined(normalize_answer(answer)), f"{answer!r} is unequal to itself"


def setup_module() -> None:
    preload()  # parses_undefined runs here, in the test process, on our own generated answers


@bounded(400)
@given(wrapped)
def test_every_graded_answer_equals_itself(text):
    check_self_equal(text)


@bounded(150)
@given(st.one_of(time_ranges, times, collections, units, money))
def test_times_lists_units_and_money_equal_themselves(answer):
    assert answers_equal(answer, answer, timeout=BUDGET), answer


def test_the_known_cases():
    for answer in ["9:00-10:00", "1{,}234", "11,\\! 111,\\! 111,\\! 100", "\\lambda = 3", "\\,", "5 \\text{ km}",
                   "3, 1, 2", "918 1/2", "1,000.99€"]:
        assert answers_equal(answer, answer), answer
    for undefined in ["1/0", "\\frac{2}{1-1}", "\\infty - \\infty"]:
        assert not answers_equal(undefined, undefined) and parses_undefined(normalize_answer(undefined))
