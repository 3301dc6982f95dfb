"""The oracle's feedback with each step redone before the verdict (traindata/checked_feedback.py), on hand-made
Arithmetic-v0 and GSM8K answers; its verdict, read back, is the plain oracle's; bounded and deterministic."""
import pytest

from lmgym.envs import make
from lmgym.traindata.checked_feedback import MAX_CHECKED_STEPS, check_step, checked_feedback
from lmgym.traindata.oracle_feedback import (
    APPROVE,
    CORRECT,
    GENERIC,
    REJECT,
    STEP,
    answer_steps,
    arithmetic_gold,
    feedback_verdict,
    gsm8k_gold_solution,
    oracle_feedback,
)
from lmgym.traindata.reflection_sft import AnswerRow, actor_refinement_sft_examples, critic_sft_examples

LENA = ("Lena has 5 stickers, buys 2 bags of 5 stickers, and gives away 3. How many stickers does Lena have? "
        "Give the final answer after ####.")  # gold: 2 * 5 = 10, 5 + 10 = 15, 15 - 3 = 12
NATALIA_GOLD = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips "
                "altogether.\n#### 72")


@pytest.mark.parametrize("answer, expected, kind", [
    ("2 * 5 = 10\n5 + 10 = 15\n15 - 3 = 12\n#### 12",
     "Check: 2 * 5 = 10; 5 + 10 = 15; 15 - 3 = 12. ", CORRECT),
    ("2 * 5 = 10\n5 + 10 = 15\n15 - 3 = 14\n#### 14",  # a slip in the last operation: redone, then named
     "Check: 2 * 5 = 10; 5 + 10 = 15; 15 - 3 = 12, not 14. ", STEP),
    ("2 * 5 = 11\n5 + 11 = 16\n16 - 3 = 13\n#### 13",  # the first wrong step ends the check
     "Check: 2 * 5 = 10, not 11. ", STEP),
    ("2 * 5 = 10\n5 + 9 = 14\n14 - 3 = 11\n#### 11",  # right arithmetic on a misread number: the gold names it
     "Check: 2 * 5 = 10; 5 + 9 = 14. ", STEP),
])
def test_each_step_is_redone_up_to_the_oracles_wrong_step(answer, expected, kind):
    gold = arithmetic_gold(LENA)
    feedback, plain = checked_feedback(LENA, answer, gold), oracle_feedback(LENA, answer, gold)
    assert feedback.text.startswith(expected) and feedback.kind == kind == plain.kind
    assert (feedback.step, feedback.expected) == (plain.step, plain.expected)
    assert feedback_verdict(feedback.text) == (APPROVE if kind == CORRECT else REJECT)
    if kind == STEP:  # the verdict names the oracle's step and its gold value
        step, value = plain.step.number, str(plain.expected.numerator)
        assert f"step {step}" in feedback.text.lower() and f"{value}, not" in feedback.text.split(". ", 1)[1]
    assert checked_feedback(LENA, answer, gold).text == feedback.text  # the same pair, the same text


def test_no_step_to_redo_and_no_step_at_all():
    gold = arithmetic_gold(LENA)
    final_only = checked_feedback(LENA, "#### 9", gold)
    assert final_only.kind == STEP and not final_only.text.startswith("Check:") and "12, not 9" in final_only.text
    assert checked_feedback(LENA, "I do not know", gold) == oracle_feedback(LENA, "I do not know", gold)
    assert oracle_feedback(LENA, "I do not know", gold).kind == GENERIC
    words = answer_steps("ten plus five = 15\n#### 15")[0]
    assert check_step(words) == "ten plus five = 15"  # no operation to redo: quoted as it is


def test_gsm8k_steps_are_redone_from_their_equations():
    gold = gsm8k_gold_solution(NATALIA_GOLD)
    answer = "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = 70 clips altogether.\n#### 70"
    feedback = checked_feedback("Natalia sold clips to 48 of her friends in April ...", answer, gold)
    assert feedback.text.startswith("Check: 48/2 = 24; 48+24 = 72, not 70. ") and feedback.kind == STEP


def test_the_check_is_bounded():
    gold = arithmetic_gold(LENA)
    answer = "\n".join(["2 * 5 = 10"] * 30 + ["#### 12"])
    text = checked_feedback(LENA, answer, gold).text
    assert text.count("2 * 5 = 10") == MAX_CHECKED_STEPS


def test_the_reflection_sft_examples_carry_the_style():
    env = make("Reflection-Arithmetic-v0", level=4, split="train")
    problem = env.unwrapped.get_problem(0)
    gold = arithmetic_gold(problem.question)
    wrong_answer = gold.text.rsplit("####", 1)[0] + f"#### {gold.answer + 1}"
    rows = [AnswerRow(problem, wrong_answer, False)]
    plain, checked = critic_sft_examples(env, rows), critic_sft_examples(env, rows, "checked")
    assert not plain[0].target.startswith("Check:") and checked[0].target.startswith("Check:")
    refine = actor_refinement_sft_examples(env, rows, "checked")[0]
    assert refine.actions == (wrong_answer, checked[0].target) and refine.target == gold.text
    with pytest.raises(ValueError, match="feedback style must be one of oracle, checked; got 'loud'"):
        critic_sft_examples(env, rows, "loud")
