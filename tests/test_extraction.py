"""lmgym.envs.extraction: where the final answer is found, the strict last-number fallback, and linear time."""

from __future__ import annotations

import pytest

from lmgym.envs.extraction import MAX_SCAN_CHARS, extract_answer, find_boxes
from lmgym.envs.rewards.functions import format_reward
from tests.cpu_timing import cpu_call


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # final answer stated in prose: the math inside $...$ / \(...\), not the last number
        ("The final answer is $\\frac{10\\sqrt{10.5}}{27}$. I hope it is correct.", "\\frac{10\\sqrt{10.5}}{27}"),
        ("The final answer is \\(x^2 + 1\\). I hope it is correct.", "x^2 + 1"),
        ("Final Answer: The final answer is $$(2, 3)$$.", "(2, 3)"),
        ("The answer is: **18**", "18"),
        # several boxes: joined when only ",", "and", "or" separate them
        ("The solutions are \\boxed{(2,2)}, \\boxed{(6,2)}", "(2,2), (6,2)"),
        ("So x is \\boxed{1} and \\boxed{2}.", "1, 2"),
        ("$\\boxed{1}$ or $\\boxed{-1}$", "1, -1"),
        ("\\boxed{3}, \\boxed{3}", "3"),
        # round four: boxes with labels, names or units between them are one answer; a correction is not
        ("So $x = \\boxed{3}$ and $y = \\boxed{5}$.", "3, 5"),
        ("(a) \\boxed{4}\n(b) \\boxed{7}", "4, 7"),
        ("\\boxed{3} cm and \\boxed{4} cm", "3, 4"),
        ("\\boxed{2} \\quad \\boxed{3}", "2, 3"),
        ("First \\boxed{4}, but actually \\boxed{5}", "5"),
        ("\\boxed{4}. Double-check: \\boxed{5}", "5"),
        # display math after "answer is" may span lines; inline math closes on its line
        ("The answer is $$\n\\frac{1}{2}\n$$", "\\frac{1}{2}"),
        ("The answer is \\[\n x = 5\n\\]", "x = 5"),
        ("The answer is $3$ or maybe $\n5$", "3"),
        ("The answer is $5 and\nthe tax is $3.", "5"),  # a "$" that does not close on its line is no math
        # LaTeX thousands marks on a final line
        ("Thus the total is $\\$1,\\!000$.", "1,000"),
        # a box in the middle, more work, a later box: the last box wins
        ("So \\boxed{3}. Wait, recheck: 4 + 1 = 5, so the answer is \\boxed{5}", "5"),
        ("\\boxed{\\boxed{7}}", "7"),
        ("\\boxed{5} is my guess; truncated \\boxed{6", "5"),
        # what worked before still works
        ("#### 1,234", "1,234"),
        ("#### **72**", "72"),
        ("The answer is 18 apples.", "18"),
        ("Natalia sold 48/2 = 24 clips in May.\nShe sold 48+24 = 72 clips.\n#### 72", "72"),
    ],
)
def test_extract_answer_finds_the_stated_answer(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("18", "18"),
        ("$18.", "18"),
        ("**18**", "18"),
        ("Total: 18 apples.", "18"),
        ("5 * 3 = 15", "15"),
        ("(3 + 4) * 2 = 14.", "14"),
        ("\\[ x = 5 \\]", "5"),
        ("So she has 12 apples left.\n\n---", "12"),
        ("It costs 1,200,000 dollars.", "1,200,000"),
    ],
)
def test_last_number_fallback_takes_a_number_that_stands_as_the_answer(text, expected):
    assert extract_answer(text) == expected
    assert extract_answer(text, last_number_fallback=False) is None


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('x') or 0",
        "print(0)",
        "exit(0)",
        "x == 0",
        "It is either 5 or 6",
        "Is it 5?",
        "Step 3: multiply by 2 and then add",
        "So she earns $18 every day at the farmers market and saves it.",
        "$x = \\frac{1}{2}$",
        "1, 2, 3,",
        "no numbers here",
        "",
    ],
)
def test_last_number_fallback_refuses_numbers_that_are_not_answers(text):
    assert extract_answer(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # words after the number, in any script (the fallback once took only ASCII letters)
        ("So she has 18 apples left.", "18"),
        ("Also bleiben ihr 42 Äpfel.", "42"),
        ("Le train parcourt 120 kilomètres.", "120"),
        ("En total quedan 7 manzanas", "7"),
        ("Итого у Маши 15 яблок.", "15"),
        ("Всего 1,200 рублей", "1,200"),
        ("إذن لديها 12 تفاحة", "12"),
        ("तो उसके पास 12 सेब हैं।", "12"),  # Devanagari vowel signs are marks, not letters
        ("她一共有 42 个", "42"),
        ("所以她还剩18个苹果。", "18"),  # no space before CJK words; "。" closes the sentence
        ("全部で42個です。", "42"),
        ("모두 42개입니다.", "42"),
        ("Der Rabatt beträgt 30%.", "30%"),
        ("Она прошла 5 км. Ответ: 15 яблок", "15"),  # the last sentence's number
    ],
)
def test_last_number_fallback_reads_words_after_the_number_in_any_language(text, expected):
    assert extract_answer(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "os.system('x') or 0",
        "foo(3)",
        "x = 2 + 3",
        "total = a - 4",
        "[1, 2][0]",
        "x2",
        "version 3.1.2",
        "return 0",
        "value = 1 if ok else 0",
        "1 if ok",
        "n := 5",
        "5x",
        "lst[0] = 7",
        "Итого: 12 или 13?",
        "答案是 42 还是 43？",
    ],
)
def test_last_number_fallback_refuses_numbers_inside_code_or_expressions(text):
    assert extract_answer(text) is None


@pytest.mark.parametrize(
    ("text", "gold", "reward"),
    [
        ("Also bleiben ihr 42 Äpfel.", "42", 1.0),
        ("Итого у Маши 15 яблок.", "15", 1.0),
        ("所以她还剩18个苹果。", "18", 1.0),
        ("إذن لديها 12 تفاحة", "12", 1.0),
        ("Итого у Маши 15 яблок.", "16", 0.0),
        ("os.system('x') or 0", "0", 0.0),
        ("x = 2 + 3", "3", 0.0),
    ],
)
def test_fallback_answers_in_any_language_score_end_to_end(text, gold, reward):
    from lmgym.envs.rewards.functions import correctness_reward

    assert correctness_reward(text, gold) == reward


def test_code_payload_does_not_score_for_gold_zero():
    from lmgym.envs.rewards.functions import correctness_reward

    assert correctness_reward("__import__('os').system('x') or 0", "0") == 0.0


def test_fallback_switch_keeps_the_marked_answers():
    for text, expected in [("#### 5", "5"), ("\\boxed{5}", "5"), ("The answer is 5.", "5")]:
        assert extract_answer(text, last_number_fallback=False) == expected


def test_find_boxes_skips_unbalanced_and_nested_boxes():
    boxes = find_boxes("a \\boxed{1} b \\boxed{\\boxed{2}} c \\boxed 3 d \\boxed{4")
    assert [(box.content, box.braced) for box in boxes] == [("1", True), ("\\boxed{2}", True), ("3", False)]


def test_only_the_last_scan_chars_are_read():
    assert extract_answer("#### 5\n" + "x " * MAX_SCAN_CHARS) is None
    assert extract_answer("#### 5\n" + "x " * (MAX_SCAN_CHARS // 4)) == "5"


def cpu_seconds(fn, *args) -> float:
    return cpu_call(fn, *args)[1]


@pytest.mark.parametrize(
    "text",
    [
        "The answer is " + "a" * 30_000,  # was 3-4 s (quadratic prose regex)
        "The answer is " + "a" * 1_000_000,  # did not finish
        "#### " + "$." * 200_000,  # was 0.8-1.6 s (_clean loop)
        "\\boxed{" * 200_000,
        "{" * 500_000 + "\\boxed{1}" + "}" * 500_000,
        "answer " * 150_000 + "is",
        "1," * 500_000,
        "1" * 1_000_000 + "x",
        "**" * 300_000 + "5" + "**" * 300_000,
        "\n" * 1_000_000 + "5",
        "\\boxed{1} and " * 70_000,
        "".join(f"\\boxed{{{i}}} and " for i in range(60_000)),  # 60,000 distinct boxes to join
        "= " * 500_000 + "5",
        "。5" * 300_000,  # a sentence stop before every number
        "5" + "个" * 1_000_000,  # one long word glued to the final number
        "答" * 500_000 + "5 Äpfel " * 10,
    ],
    ids=lambda text: repr(text[:20]) + f"..{len(text)}",
)
def test_extraction_and_format_reward_are_linear_on_hostile_text(text):
    assert cpu_seconds(extract_answer, text) < 0.5
    assert cpu_seconds(format_reward, text, "1", {}) < 0.5


def test_format_reward_on_many_open_boxes_is_fast():
    assert cpu_seconds(format_reward, "\\boxed{" * 4300, "1", {}) < 0.1  # was 3.3 s (rescan per box)
    assert format_reward("\\boxed{" * 4300, "1", {}) == 0.0
    assert format_reward("\\boxed{" * 4300 + "5}", "1", {}) == 1.0


@pytest.mark.parametrize(
    "text", ["**Answer:** 18", "**Final Answer**: 18", "The answer is **18**.", "Answer: $18$", "answer is\n18"]
)
def test_bold_and_dollar_around_a_stated_answer(text):
    assert extract_answer(text, last_number_fallback=False) == "18"
