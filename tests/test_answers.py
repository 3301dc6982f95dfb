"""Tests for lmgym.envs.answers: extraction, normalisation and safe, time-bounded equivalence."""

from __future__ import annotations

import builtins
import os
import time

import pytest

from lmgym.envs import answers
from lmgym.envs.answers import answers_equal, extract_answer, gsm8k_gold, normalize_answer
from tests.cpu_timing import RUNAWAY_BOUND_S, VERDICT_BUDGET_S, cpu_call, cpu_call_within, within_budget
from tests.tiers import fast_rows, slow

# (predicted, gold, expected)
EQUIVALENCE_TABLE = [
    # plain / commas
    ("42", "42", True),
    ("1,000", "1000", True),
    ("1,234,567", "1234567", True),
    ("1,000", "100", False),
    # decimals
    ("5.00", "5", True),
    ("0.50", ".5", True),
    ("2.5", "2.50001", False),
    ("3.14159265", r"\pi", True),  # relative tolerance 1e-6
    ("3.14", r"\pi", False),
    # fractions
    ("0.5", "1/2", True),
    ("0.5", r"\frac{1}{2}", True),
    (r"\dfrac12", "0.5", True),
    (r"\tfrac{3}{4}", "0.75", True),
    (r"\frac{\frac{1}{2}}{3}", "1/6", False),  # nested fraction: an expression, not a computed number
    ("-3/4", r"-\frac{3}{4}", True),
    (r"\frac{-3}{4}", "-0.75", True),
    ("1/3", "0.333", True),  # the gold is 1/3 rounded to its three significant digits
    ("1/3", "0.33", False),  # too few digits to tell a rounding
    # percentages: exactly one side with % matches the value or value/100
    ("50%", "50", True),
    ("50%", "0.5", True),
    (r"50\%", "50", True),
    ("50%", "0.6", False),
    ("50%", "0.5%", False),
    # dollars and units
    ("$5", "5", True),
    (r"\$1,234.50", "1234.5", True),
    (r"5\text{ cm}", "5", True),
    (r"12\text{ m}^2", "12", True),
    (r"90^\circ", "90", True),
    (r"\text{Monday}", "Monday", True),
    # negatives
    ("−3", "-3", True),
    ("-3", "3", False),
    (r"\left(-2\right)", "-2", True),
    # symbolic
    (r"2\sqrt{2}", r"\sqrt{8}", True),
    ("x+1", "1+x", True),
    (r"\frac{\pi}{2}", r"\pi/2", True),
    ("(x+1)^2", "x^2+2x+1", True),
    (r"\sqrt[3]{8}", "2", False),  # a number gold needs a computed number, not an expression
    ("10 + 11", "21", False),  # the reward hack a GRPO run found: copying the question after ####
    ("#### 10 + 11", "21", False),
    (r"\frac{42}{2}", "21", True),
    ("(21)", "21", True),
    ("x = 5", "5", True),
    (r"2\pi r", r"2 r \pi", True),
    ("x+1", "x+2", False),
    ("(x+1)^2", "x^2+1", False),
    ("x", "y", False),
    # tuples / intervals
    ("(1,2)", "(1, 2)", True),
    ("(0.5, 3)", r"\left(\frac{1}{2}, 3\right)", True),
    (r"(\sqrt{2}, x+1)", r"(\sqrt2, 1+x)", True),
    ("(1,2)", "(2,1)", False),
    ("(1,2)", "[1,2]", False),
    ("(1,2,3)", "(1,2)", False),
    # clear negatives
    ("12", "13", False),
    ("1/2", "0.6", False),
    ("1/0", "1", False),
    ("five", "5", False),
    # None / empty
    (None, "5", False),
    ("", "5", False),
    ("", "", False),
    ("   ", "0", False),
]


@pytest.mark.parametrize(("predicted", "gold", "expected"), fast_rows(EQUIVALENCE_TABLE, every=4))
def test_equivalence_table(predicted, gold, expected):
    # the verdict under a generous budget (tests/cpu_timing.py); its cost: under the default 1 s on its fastest run
    verdict, cpu = cpu_call_within(1.0, answers_equal, predicted, gold, timeout=VERDICT_BUDGET_S)
    assert verdict is expected
    assert cpu < 1.0


def test_table_is_big_enough():
    assert len(EQUIVALENCE_TABLE) >= 45
    assert {e for *_, e in EQUIVALENCE_TABLE} == {True, False}


ADVERSARIAL = [
    "9**9**9",
    "9^9^9^9",
    "2^{10^{10}}",
    "(2^100)^100",
    "1e999999999",
    "__import__('os').system('echo hi')",
    "().__class__.__bases__[0]",
    "(" * 10000 + "1" + ")" * 10000,
    "(" * 200 + "1" + ")" * 200,
    "[" * 10000,
    "{" * 400,
    "\\frac{" * 100 + "1" + "}{2}" * 100,
    "-" * 450 + "1",
    "1" * 100000,
    "lambda: 1",
    "open('/etc/passwd')",
    "*".join(f"sqrt(7^{k}+1)" for k in range(60, 95))[:499].rsplit("*", 1)[0],  # radicals
    "\\sqrt{" + "9" * 450 + "}",
]


@pytest.mark.parametrize("text", fast_rows([(t,) for t in ADVERSARIAL], every=4,
                                             ids=[str(i) for i in range(len(ADVERSARIAL))]))
def test_adversarial_inputs_are_rejected_quickly(text):
    for predicted, gold in ((text, "1"), ("1", text), (text, "x")):  # the default budget: 1 s of CPU
        verdict, cpu = cpu_call_within(RUNAWAY_BOUND_S, answers_equal, predicted, gold)  # remeasured over it
        assert verdict is False
        assert cpu < RUNAWAY_BOUND_S


def test_no_code_is_executed(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    calls = []
    real_eval, real_exec = builtins.eval, builtins.exec
    monkeypatch.setattr(builtins, "eval", lambda *a, **k: calls.append(a) or real_eval(*a, **k))
    monkeypatch.setattr(builtins, "exec", lambda *a, **k: calls.append(a) or real_exec(*a, **k))
    payloads = [
        f"__import__('os').system('touch {marker}')",
        f"exec(\"open('{marker}', 'w')\")",
        f"open('{marker}', 'w')",
    ]
    for payload in payloads:
        assert answers_equal(payload, "0") is False
        assert answers_equal("x", payload) is False
    assert not marker.exists()
    assert calls == []


SLOW = ("(x+y+z+w+1)^40", "(x+y+z+w+1)^39*(x+y+z+w+2)")  # simplify takes seconds


@slow
def test_cpu_budget_stops_a_slow_symbolic_call_and_the_worker_is_reused():
    assert answers_equal("(x+1)^2", "x^2+2x+1") is True  # the worker is up
    pid = answers._WORKER.pid
    verdict, cpu = cpu_call(answers_equal, *SLOW, timeout=0.3)
    assert verdict is False
    assert cpu < within_budget(0.3)
    assert answers._WORKER.pid == pid  # stopped by its CPU timer, not killed
    assert answers_equal("(x-1)(x+1)", "x^2-1") is True


@slow
def test_killed_worker_is_replaced():
    assert answers_equal("(x+1)^2", "x^2+2x+1") is True
    pid = answers._WORKER.pid
    os.kill(pid, 9)
    for _ in range(200):  # until the kernel has killed it (a zombie until the parent reaps it)
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.01)
    # the dead worker is noticed and replaced. The CPU budget is not under test here (the test above): in a loaded
    # full run (2026-11-29), with this file run late in a large worker process, the replacement's first request
    # went over the default 1 CPU s and answered False (likely its fork's copy-on-write faults; not reproduced idle)
    assert answers_equal("(x-1)(x+1)", "x^2-1", timeout=10.0) is True
    assert answers._WORKER.pid not in (None, pid)
    os.kill(answers._WORKER.pid, 0)  # alive


@slow
def test_default_timeout_bounds_slow_symbolic_call():
    verdict, cpu = cpu_call(answers_equal, *SLOW)
    assert verdict is False
    assert cpu < within_budget(1.0)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("$1,234$", "1234"),
        (r"\dfrac{1}{2}", r"\frac{1}{2}"),
        (r"\left( 1, 2 \right)", "(1,2)"),
        (r"5\text{ dollars}.", "5"),
        (r"30^{\circ}", "30"),
        (r"10\!000", "10000"),
        (r"50\%", "50%"),
        ("−7", "-7"),
        (r"\pi x", r"\pi x"),
        ("x = 3", "3"),
        ("1, 234", "1,234"),  # a comma and a space make a list, not a thousands separator
        ("1,234", "1234"),
        ("42 Äpfel", "42"),  # words after a number, in any script
        ("15 яблок.", "15"),
        ("42个", "42"),
        ("5 m", "5"),  # one-letter unit, set apart by a space
        ("5m", "5m"),  # glued to the number: may be a variable
        ("2π", "2π"),  # Greek letters are math
    ],
)
def test_normalize_answer(raw, expected):
    assert normalize_answer(raw) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Half of 48 is 24.\n#### 1,234\n", "1,234"),
        ("#### $42.", "42"),
        ("I think \\boxed{7} no wait #### 8", "8"),
        ("So the result is \\boxed{\\frac{1}{\\sqrt{2}}}.", "\\frac{1}{\\sqrt{2}}"),
        ("first \\boxed{1}, finally \\boxed{\\{a, {b}\\}}", "\\{a, {b}\\}"),
        ("The answer is 18 apples.", "18"),
        ("Final Answer: $\\frac{3}{4}$.", "\\frac{3}{4}"),
        ("So the answer is that she has 5 apples left.", "5"),
        ("She had 3 apples and 4.5 pears, so -7/8 remains.", "-7/8"),
        ("It costs 1,200,000 dollars.", "1,200,000"),
        ("no numbers here", None),
        ("", None),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "\\boxed{" + "{" * 10000 + "1" + "}" * 10000 + "}",
        "[" * 10000,
        "{" * 10000 + "7",
        "word " * 20000,
        "1, " * 40000,
        "The answer is " * 7000,
        "\\boxed{" * 14000,
    ],
)
def test_extract_answer_is_fast_on_large_inputs(text):
    assert cpu_call(extract_answer, text)[1] < 0.5


def test_extract_answer_large_text_finds_final_answer():
    text = "blah 12 " * 12500 + "\n#### 99"
    assert len(text) >= 100_000
    (found, spent) = cpu_call(extract_answer, text)
    assert found == "99" and spent < 0.5
    (found, spent) = cpu_call(extract_answer, text[: text.rfind("#")])
    assert found == "12" and spent < 0.5


def test_gsm8k_gold():
    assert gsm8k_gold("She sells 16-3-4=<<16-3-4=9>>9 eggs.\n#### 18") == "18"
    assert gsm8k_gold("Total is <<1000+234=1234>>1,234\n#### 1,234") == "1234"
    with pytest.raises(ValueError, match="####"):
        gsm8k_gold("no final answer marker 42")


def test_extracted_answer_matches_gold_end_to_end():
    gold = gsm8k_gold("...\n#### 1,600")
    assert answers_equal(extract_answer("So she makes $1,600.00 per week.\n#### $1,600.00"), gold)
    assert not answers_equal(extract_answer("The answer is 1,500."), gold)


def test_two_plain_integers_take_the_fast_path_and_get_the_general_verdict(monkeypatch):
    import re

    import lmgym.envs.answers as answers

    values = ["0", "-0", "7", "07", "-7", "12", "204", "1000001", "1000000", " 5", "5\n", "-00",
              "99999999999999999999", "099999999999999999999", "1.0", "+5", "1,000", "5%"]
    fast = {(a, b): answers.answers_equal(a, b) for a in values for b in values}
    monkeypatch.setattr(answers, "_PLAIN_INTEGER_RE", re.compile(r"(?!)"))  # the general path alone
    assert fast == {(a, b): answers.answers_equal(a, b) for a in values for b in values}
    monkeypatch.undo()

    def never(*args):
        raise AssertionError("normalised")

    monkeypatch.setattr(answers, "_normalize", never)
    assert answers.answers_equal("204", "204") and not answers.answers_equal("204", "6")
    assert answers.answers_equal(" -7\n", "-07")
