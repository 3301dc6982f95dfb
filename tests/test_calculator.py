"""Tests for lmgym.envs.calculator: safe arithmetic and in-step calculation requests."""

from __future__ import annotations

import pytest

from lmgym.envs.calculator import apply_calculator, find_calculation, safe_calculate
from tests.cpu_timing import cpu_call


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("48/2", "24"),
        ("48 / 2", "24"),
        ("3 + 4 * 2", "11"),
        ("(3 + 4) * 2", "14"),
        ("7 - 10", "-3"),
        ("-5 - 5", "-10"),
        ("10 / 4 * 2", "5"),
        ("1,000 + 1", "1001"),
        ("3 x 4", "12"),
        ("3 × 4", "12"),
        ("0.1 + 0.2", "0.3"),  # exact, not 0.30000000000000004
        ("1.5 * 4", "6"),
        # division to decimals
        ("5/2", "2.5"),
        ("1/8", "0.125"),
        ("1/3", "0.333333"),
        ("2/3", "0.666667"),
        ("-1/3", "-0.333333"),
        ("1/3000000", "0.000000333333"),
        # powers
        ("2^10", "1024"),
        ("2**10", "1024"),
        ("2**3**2", "512"),
        ("2**-2", "0.25"),
        ("2**0.5", "1.414214"),
        ("10^30", "1" + "0" * 30),
    ],
)
def test_safe_calculate(expression, expected):
    assert safe_calculate(expression) == expected


@pytest.mark.parametrize(
    "expression",
    [
        "",
        "   ",
        "1/0",
        "0**-1",
        "(-1)**0.5",
        "2 +",
        "2 3",
        "abc",
        "x",
        "1e5",
        "9**9**9",
        "9^9^9^9",
        "10**1000",
        "(2**100)**100",
        "__import__('os').system('echo hi')",
        "().__class__.__bases__[0]",
        "lambda: 1",
        "open('/etc/passwd')",
        "(" * 10000 + "1" + ")" * 10000,
        "(" * 60 + "1" + ")" * 60,
        "[" * 10000,
        "1" * 100000,
        "1" * 250,
        "-" * 190 + "1",
    ],
)
def test_safe_calculate_rejects_invalid_quickly(expression):
    result, spent = cpu_call(safe_calculate, expression)
    assert result is None and spent < 1.0


def test_safe_calculate_non_string_returns_none():
    assert safe_calculate(None) is None  # type: ignore[arg-type]
    assert safe_calculate(12) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("step", "expression"),
    [
        ("She sold <<48/2=", "48/2"),
        ("She sold <<48/2= ", "48/2"),
        ("So she has 48 / 2 =", "48 / 2"),
        ("Total: (3 + 4) x 2 =", "(3 + 4) x 2"),
        ("It is 3. Then 4 * 5 =", "4 * 5"),
        ("It is 3. 4 * 5 =", "4 * 5"),
        ("(so 3 + 4 =", "3 + 4"),
        ("He pays 3 × 4^2 =", "3 × 4^2"),
        ("so x = -3 + 1 =", "-3 + 1"),
    ],
)
def test_find_calculation(step, expression):
    # the result goes at the end of the step, where the env appends it
    assert find_calculation(step) == (expression, len(step))


@pytest.mark.parametrize(
    "step",
    [
        "",
        "No request here.",
        "She has 5 apples =",  # no operation
        "Let x =",
        "So 48 / 2 = 24",  # already completed
        "He had <<48/2=24>> 24 eggs.",
        "a <<48/2= then more text",
        "if 3 + 4 <=",
        "2 + 3 ==",
        "<<abc=",
    ],
)
def test_find_calculation_none(step):
    assert find_calculation(step) is None


@pytest.mark.parametrize(
    ("step", "injected"),
    [
        ("She sold <<48/2=", "24>>"),
        ("So she has 48 / 2 =", " 24"),
        ("So she has 48 / 2 = ", "24"),
        ("Each costs 10 / 4 =", " 2.5"),
        ("That is 1/3 =", " 0.333333"),
        ("Total: (3 + 4) x 2 =", " 14"),
        ("Now <<1/0=", ""),  # request found, but not computable
        ("Huge 9^9^9 =", ""),
        ("Nothing to do here.", ""),
    ],
)
def test_apply_calculator(step, injected):
    assert apply_calculator(step) == (step, injected)


def test_apply_calculator_completes_gsm8k_annotation():
    step, injected = apply_calculator("Natalia sold 48/2 = <<48/2=")
    assert step + injected == "Natalia sold 48/2 = <<48/2=24>>"


def test_apply_calculator_is_fast_on_long_steps():
    long_steps = ("1 + " * 30000 + "1 =", "(" * 50000 + "=", "<<" * 30000 + "1+1=", "x" * 100000 + " =")
    for step in long_steps:
        assert cpu_call(apply_calculator, step)[1] < 1.0


# ---- thousands separators (issue 7: "1,500 + 200 =" injected 700, "1,000 * 2 =" injected 0) ----------


@pytest.mark.parametrize(
    ("step", "injected"),
    [
        ("After a year it has 1,500 + 200 =", " 1700"),
        ("So 1,000 * 2 =", " 2000"),
        ("He pays $1,200 / 2 =", " 600"),
        ("1,200,000 * 91 =", " 109200000"),
        ("It carries 12,345.5 - 0.5 =", " 12345"),
        ("<<1,000*2=", "2000>>"),
        ("so 3, 4 + 5 =", " 9"),  # a list comma still ends the text before the request
        ("We have 2,50 + 1 =", " 51"),
    ],
)
def test_apply_calculator_reads_thousands_separators(step, injected):
    assert apply_calculator(step) == (step, injected)


def test_gsm8k_annotations_still_complete_with_their_results():
    for step, result in [("Total is <<1000+234=", "1234>>"), ("<<12/60=", "0.2>>"), ("<<0.2*50=", "10>>")]:
        assert apply_calculator(step)[1] == result


def test_gsm8k_thousands_requests_agree_with_their_annotations(shared_data):
    """Every visible "a,bcd op e =" before a GSM8K annotation computes the annotation's result."""
    import json
    import re

    path = shared_data / "gsm8k" / "train.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    request = re.compile(r"[0-9][0-9,.]*(?: *[-+*/x] *[0-9][0-9,.]*)+ *= *<<([^>=]*)=([^>]*)>>")
    checked = agreed = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        for m in request.finditer(json.loads(line)["answer"]):
            visible = m.group(0)[: m.group(0).index("<<")].rstrip()
            if not re.search(r"[0-9],[0-9]{3}", visible) or "," in m.group(1):
                continue
            checked += 1
            injected = apply_calculator(visible)[1].strip()
            agreed += injected != "" and float(injected) == pytest.approx(float(m.group(2)))
    assert checked > 100 and agreed >= checked - 2  # GSM8K itself has a typo or two ("13,2000 / 60")


def test_an_unclosed_annotation_on_an_earlier_line_does_not_hide_a_trailing_request():
    assert apply_calculator("She wrote <<48/2\nSo 3 + 4 =") == ("She wrote <<48/2\nSo 3 + 4 =", " 7")
    assert apply_calculator("a <<48/2= then more text") == ("a <<48/2= then more text", "")
