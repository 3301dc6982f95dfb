"""lmgym.envs.grading.symbolic called in-process on trusted inputs: LaTeX parsing with its caps, the structural
comparison rules, and the request handler (in production it runs only inside the CPU-bounded worker)."""

from __future__ import annotations

import pytest

from lmgym.envs.grading import symbolic
from lmgym.envs.grading.symbolic import (
    MAX_LATEX_CHARS,
    MAX_LATEX_NESTING,
    compare_default,
    is_complex,
    parse_latex,
    serve,
)
from lmgym.envs.rewards.guard import cpu_time_limit
from tests.cpu_timing import cpu_call


@pytest.fixture(scope="module", autouse=True)
def parser():
    symbolic.preload()


@pytest.mark.parametrize(
    ("predicted", "gold", "equal"),
    [
        ("(x-1)(x+1)", "x^2-1", True),  # expressions symbolically
        ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}", True),
        ("x^2+1", "x^2-1", False),
        ("\\{1,2\\}", "\\{2,1\\}", True),  # sets in any order
        ("(1,2)", "(2,1)", False),  # tuples in order
        ("(1,2)", "(1,2)", True),
        ("[1,3)", "[1,3]", False),  # intervals with their bracket types
        ("x \\le 5", "5 \\ge x", True),  # flipped inequalities
        ("x=2", "2", True),  # an assignment against its value
        ("3+2i", "2i+3", True),  # complex numbers
    ],
)
def test_compare_default_follows_the_structural_rules(predicted, gold, equal):
    assert compare_default((predicted, gold, False, False)) is equal


def test_percent_on_one_side_compares_both_readings():
    assert compare_default(("50", "0.5", True, False)) and compare_default(("0.5", "50", False, True))
    assert compare_default(("50", "50", True, False))  # "50%" also reads as 50
    assert not compare_default(("50", "0.4", True, False)) and not compare_default(("x", "0.5", True, False))


@pytest.mark.parametrize(
    "latex",
    ["x+" * (MAX_LATEX_CHARS // 2) + "1", "{" * (MAX_LATEX_NESTING + 1) + "1" + "}" * (MAX_LATEX_NESTING + 1),
     "9^{9^{9^{9}}}", "2^{2^{2^{2^{2^{2}}}}}", "(10^{100})!", "\\frac{1}{"],
)
def test_parse_latex_refuses_oversized_nested_huge_or_broken_input_quickly(latex):
    with cpu_time_limit(10.0):  # a regression fails here instead of hanging the suite (Python-level loops)
        parsed, seconds = cpu_call(parse_latex, latex)
    assert parsed is None and seconds < 2.0


def test_is_complex_sees_a_standalone_i_only():
    assert is_complex("3+2i") and is_complex("(1+i)^2")
    assert not is_complex("\\pi") and not is_complex("xi") and not is_complex("\\sin x")


def test_serve_dispatches_and_never_raises():
    assert serve(("default", ("x^2+2x+1", "(x+1)^2", False, False))) is True
    assert serve(("default", ("x",))) is False  # a malformed payload is a verdict, not an exception
    assert serve(("math_verify", ("\\frac{1}{2}", "0.5"))) is True


@pytest.mark.parametrize(
    "latex",
    ["1/0", "9:00", r"\frac{x}{0}", "0/0", r"\frac{2}{1-1}", r"\frac{1}{\sin \pi}", r"\infty - \infty", r"\log 0",
     r"\cot 0", r"\{1, 1/0\}", "x = 1/0", r"\begin{pmatrix}1/0 & 1\end{pmatrix}"],
)
def test_undefined_values_are_found_even_where_the_parser_left_them_unevaluated(latex):
    assert symbolic.parses_undefined(latex) is True
    assert compare_default((latex, latex, False, False)) is False  # equal to nothing, not even itself


@pytest.mark.parametrize(
    "latex",
    [r"\infty", r"(-\infty, 3]", r"\frac{0}{4}", r"\frac{x^2-1}{x-1}", r"\frac{1}{x}", "0^0", r"\sqrt{-1}",
     r"\lim_{x \to 0} \frac{\sin x}{x}", r"\int_0^1 x\,dx", "3:4", "Tuesday", r"\frac{1}{"],
)
def test_defined_or_unparsable_answers_are_not_undefined(latex):
    assert symbolic.parses_undefined(latex) is False


def test_math_verify_handler_refuses_undefined_values():
    assert compare_default(("1/0", "2/0", False, False)) is False
    assert serve(("math_verify", ("1/0", "1/0"))) is False
    assert serve(("math_verify", (r"\frac{3}{0}", r"\frac{5}{0}"))) is False
    assert serve(("math_verify", ("1/2", "0.5"))) is True
