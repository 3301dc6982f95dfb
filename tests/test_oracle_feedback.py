"""The programmatic oracle: the first wrong step of an answer against hand-made Arithmetic-v0 and GSM8K golds."""
from fractions import Fraction

import pytest

from lmgym.envs.base import Problem
from lmgym.traindata.oracle_feedback import (
    CORRECT_PHRASES,
    GENERIC_PHRASES,
    STEP_PHRASES,
    answer_steps,
    arithmetic_gold,
    gold_solution,
    gsm8k_gold_solution,
    oracle_feedback,
)

ARITH_Q = "What is 12 + 7 * 3?"  # gold: 7 * 3 = 21, 12 + 21 = 33
GSM_Q = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many?"
GSM_A = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
         "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72")


def test_gold_steps_of_arithmetic_and_gsm8k():
    gold = arithmetic_gold(ARITH_Q)
    assert [(s.operands, s.value) for s in gold.steps] == [((7, 3), 21), ((12, 21), 33)]
    assert gold.answer == 33 and gold.text == "7 * 3 = 21\n12 + 21 = 33\n#### 33"
    gsm = gsm8k_gold_solution(GSM_A)
    assert [(s.operands, s.value) for s in gsm.steps] == [((48, 2), 24), ((48, 24), 72)] and gsm.answer == 72
    assert gsm.text.startswith("Natalia sold 48/2 = 24 clips in May.\n") and gsm.text.endswith("#### 72")
    assert gold_solution(Problem("Q", "72", "gsm8k/train/0", fields={"question": "Q", "answer": GSM_A})) == gsm
    assert gold_solution(Problem(ARITH_Q, "33", "arithmetic/L3/5")) == gold
    with pytest.raises(ValueError, match="no gold steps for problem 'math/1'"):
        gold_solution(Problem("x?", "1", "math/1"))


def test_steps_are_read_with_commas_decimals_negatives_and_chains():
    steps = answer_steps(
        "So 1,200 + 0.5 = 1,200.5 dollars\n12 + 7 * 3 = 12 + 21 = 33\n3 - 20 = -17\nno result\n#### -17")
    assert [(s.number, s.operands, s.value, s.final) for s in steps] == [
        (1, (1200, Fraction(1, 2)), Fraction(2401, 2), False), (2, (12, 21), 33, False), (3, (3, 20), -17, False),
        (4, (), -17, True)]
    assert len(answer_steps("1 + 1 = 2\n" * 1000)) == 64  # bounded


def test_arithmetic_first_wrong_step_and_its_gold_value():
    gold = arithmetic_gold(ARITH_Q)
    fb = oracle_feedback(ARITH_Q, "7 * 3 = 22\n12 + 22 = 34\n#### 34", gold)
    assert (fb.kind, fb.step.number, fb.step.value, fb.expected) == ("step", 1, 22, 21)
    assert "step 1" in fb.text and "21" in fb.text and "22" in fb.text
    # the first step right, the second miscomputed: the gold step with its operands says 33
    fb = oracle_feedback(ARITH_Q, "7 * 3 = 21\n21 + 12 = 35\n#### 35", gold)
    assert (fb.step.number, fb.expected) == (2, 33)
    # a wrong operation: no gold step has its operands (12, 7), so the gold step at its position (21)
    fb = oracle_feedback(ARITH_Q, "12 + 7 = 19\n19 * 3 = 57\n#### 57", gold)
    assert (fb.step.number, fb.step.text, fb.expected) == (1, "12 + 7 = 19", 21)


def test_right_answer_and_no_parseable_step():
    gold = arithmetic_gold(ARITH_Q)
    right = oracle_feedback(ARITH_Q, "7 * 3 = 21\n12 + 21 = 33\n#### 33", gold)
    assert right.kind == "correct" and right.text in CORRECT_PHRASES and right.step is None
    assert oracle_feedback(ARITH_Q, "#### 40", gold, correct=True).kind == "correct"  # the env's verdict wins
    generic = oracle_feedback(ARITH_Q, "I think it is forty.", gold)
    assert generic.kind == "generic" and generic.text in GENERIC_PHRASES


def test_gsm8k_a_step_whose_value_appears_elsewhere_in_gold_is_not_flagged():
    gold = gsm8k_gold_solution(GSM_A)
    # step 1 states 72 (a gold value, of the second gold step): not a mistake; step 2's 96 is
    answer = "Together 24 + 48 = 72 clips.\nDoubled: 48 * 2 = 96.\n#### 96"
    fb = oracle_feedback(GSM_Q, answer, gold)
    assert (fb.kind, fb.step.number, fb.step.value, fb.expected) == ("step", 2, 96, 24)  # 48 and 2: gold step 1
    # a question number restated is no mistake; the wrong sum is
    fb = oracle_feedback(GSM_Q, "April: 48 = 48\nMay: 48/2 = 24\nTotal 48 + 24 = 70\n#### 70", gold)
    assert (fb.step.number, fb.expected) == (3, 72)
    # every step agrees with a gold value but the final answer is an intermediate one: the final line is wrong
    fb = oracle_feedback(GSM_Q, "48/2 = 24\n#### 24", gold)
    assert (fb.step.number, fb.step.final, fb.expected) == (2, True, 72)


def test_phrasings_vary_but_are_deterministic():
    gold = arithmetic_gold(ARITH_Q)
    answers = [f"7 * 3 = {v}\n#### {v}" for v in range(34, 74)]  # all wrong at step 1 (7 * 3 should be 21)
    feedback = [oracle_feedback(ARITH_Q, a, gold) for a in answers]
    assert [f.text for f in feedback] == [oracle_feedback(ARITH_Q, a, gold).text for a in answers]
    used = {[p.format(step=1, quote=f"7 * 3 = {v}", got=v, expected=21) for p in STEP_PHRASES].index(f.text)
            for f, v in zip(feedback, range(34, 74))}  # each text is one phrasing, filled in
    assert len(used) >= 3
