"""A programmatic oracle critic: feedback on an answer from the problem's gold step-by-step solution.

Gold solutions (`GoldSolution`): Arithmetic-v0's generated steps ("a op b = c", `arithmetic_steps`) and
GSM8K's worked solutions, whose `<<48/2=24>>` annotations hold each intermediate result.

Reading an answer (model text: never evaluated, bounded): its first `MAX_ANSWER_CHARS` characters, at most
`MAX_LINES` lines of at most `MAX_LINE_CHARS` characters each. A line is a step when it states a result:
the number after its last "=" (its operands: the numbers between the "=" before that one, or the line's
start, and it), or the number after "####" (the final answer). Operands are unsigned (a minus between numbers is an
operator) and compared by magnitude, in any order.

Feedback (`oracle_feedback`):
- a correct final answer: "correct, keep it";
- else the first step whose value differs from every gold value (the gold intermediate results, the
  gold answer, and the numbers the question states, which are given and never a mistake), with what it
  should have been, and the instruction to redo from there. What it should have been: the result of the
  gold step with the same operands (in any order), when one exists (the operation was miscomputed);
  otherwise the result of the gold step at the same position (the k-th step of the answer against the
  k-th gold step; past the last gold step, the gold answer);
- a wrong answer whose every step agrees with some gold value: its last step is wrong and should be the
  gold answer;
- no step at all: generic feedback ("the final answer is wrong; recompute step by step").

Problems without gold steps (MATH: its solutions are free text, no step values to compare against):
`verdict_feedback` says only what the final-answer verdict says: "correct, keep it" or the generic feedback.

Each kind has several phrasings; the one used is chosen by an RNG seeded with a hash of (question,
answer), so the same pair always gets the same text.
"""
from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from fractions import Fraction

from lmgym.envs.answers import answers_equal
from lmgym.envs.base import Problem
from lmgym.envs.extraction import extract_answer

# how a critic's feedback in the oracle's language is read back: evaluation's, imported here as it was defined here
from lmgym.evaluation.reflection_critic_metrics import APPROVE, REJECT, UNCLEAR, feedback_verdict  # noqa: F401
from lmgym.policies.few_shot import gsm8k_solution_steps
from lmgym.traindata.step_data.arithmetic_gold import arithmetic_steps, solved_arithmetic
from lmgym.traindata.step_data.equations import format_number, parse_number

MAX_ANSWER_CHARS = 4000  # an answer is read from its first this-many characters
MAX_LINE_CHARS = 300  # each line from its first this-many characters
MAX_LINES = 64  # and at most this many lines
MAX_QUOTE_CHARS = 80  # a step quoted in feedback is cut to this length

_NUMBER = r"-?\$?\d{1,12}(?:,\d{3}){0,4}(?:\.\d{1,8})?"
_OPERAND_RE = re.compile(r"(?<![\d.,])\d{1,12}(?:,\d{3}){0,4}(?:\.\d{1,8})?")  # unsigned: a minus is an operator
_RESULT_RE = re.compile(rf"=\s*\$?\s*(?:<<[^<>=]{{0,200}}=\s*)?({_NUMBER})")
_FINAL_RE = re.compile(rf"####\s*\$?\s*({_NUMBER})")
_ANNOTATION_RE = re.compile(r"<<([^<>=]{1,200})=([^<>]{1,40})>>")

CORRECT, STEP, GENERIC = "correct", "step", "generic"
CORRECT_PHRASES = (
    "The answer is correct. Keep it as it is.",
    "Correct: every step and the final answer check out. Keep this answer.",
    "This solution is right. Keep the same final answer.",
    "All steps are correct and so is the final answer; keep it.",
)
STEP_PHRASES = (
    'Step {step} is wrong: "{quote}" gives {got}, but it should be {expected}. Redo the solution from step {step}.',
    'The first mistake is in step {step} ("{quote}"): the result should be {expected}, not {got}. '
    "Recompute from step {step} onward.",
    'Check step {step}: "{quote}" should give {expected} instead of {got}. Start again from that step.',
    "Everything before step {step} is fine, but step {step} ({quote}) gets {got} where it should get "
    "{expected}. Redo it and the steps after it.",
)
GENERIC_PHRASES = (
    "The final answer is wrong. Recompute the solution step by step.",
    "This answer is not correct. Work through the problem again one step at a time.",
    "The result is wrong; redo the calculation step by step and check each result.",
)


@dataclass(frozen=True)
class GoldStep:
    """One gold intermediate result and the operands it was computed from."""

    operands: tuple[Fraction, ...]
    value: Fraction


@dataclass(frozen=True)
class GoldSolution:
    """A problem's gold steps, its final answer, and its worked solution as the actor should write it."""

    steps: tuple[GoldStep, ...]
    answer: Fraction
    text: str


@dataclass(frozen=True)
class AnswerStep:
    """A step read from an answer: its line number among the steps (from 1), its text and stated result."""

    number: int
    text: str
    operands: tuple[Fraction, ...]
    value: Fraction
    final: bool = False


@dataclass(frozen=True)
class Feedback:
    """The oracle's verdict: its text, its kind (CORRECT, STEP, GENERIC) and, for STEP, the wrong step and
    the value it should have had."""

    text: str
    kind: str
    step: AnswerStep | None = None
    expected: Fraction | None = None


def arithmetic_gold(question: str) -> GoldSolution:
    """The gold solution of an Arithmetic-v0 question (ValueError, one line, if it is not one)."""
    done, value = solved_arithmetic(question)
    steps = tuple(GoldStep((abs(left), abs(right)), result) for left, _, right, result in done)
    text = "\n".join(line.rstrip("\n") for line in arithmetic_steps(question))
    return GoldSolution(steps, value, text)


def gsm8k_gold_solution(answer: str) -> GoldSolution:
    """The gold solution of a GSM8K answer ("... <<48/2=24>>24 ...\\n#### 72"): each annotation is a step."""
    if not isinstance(answer, str) or "####" not in answer:
        raise ValueError("a GSM8K answer needs a '#### <number>' line")
    steps = []
    for match in _ANNOTATION_RE.finditer(answer[:20_000]):
        try:
            value = parse_number(match.group(2).strip())
        except ValueError:
            continue
        steps.append(GoldStep(_numbers(match.group(1)), value))
    final = _FINAL_RE.search(answer)
    if final is None:
        raise ValueError(f"the GSM8K answer's final line is not a number: {answer.rsplit('####', 1)[1][:40]!r}")
    return GoldSolution(tuple(steps), parse_number(final.group(1)), gsm8k_solution_steps(answer))


def gold_solution(problem: Problem) -> GoldSolution:
    """The gold solution of an Arithmetic-v0 problem or a GSM8K row (its "answer" field); ValueError otherwise."""
    answer = problem.fields.get("answer") if problem.fields else None
    if isinstance(answer, str) and "####" in answer:
        return gsm8k_gold_solution(answer)
    if problem.problem_id.startswith("arithmetic/") and isinstance(problem.question, str):
        return arithmetic_gold(problem.question)
    raise ValueError(f"no gold steps for problem {problem.problem_id!r}: the oracle knows Arithmetic-v0 and GSM8K")


def answer_steps(answer: str) -> list[AnswerStep]:
    """The steps of an answer that state a result (see the module docstring), in order, bounded."""
    steps = []
    for line in answer[:MAX_ANSWER_CHARS].splitlines()[:MAX_LINES]:
        line = line.strip()[:MAX_LINE_CHARS]
        final = _FINAL_RE.search(line)
        results = list(_RESULT_RE.finditer(line))
        if final is not None:
            operands, value = (), parse_number(final.group(1))
        elif results:
            last = results[-1]
            start = results[-2].start() + 1 if len(results) > 1 else 0  # after the "=" before the last one
            operands, value = _numbers(line[start:last.start()]), parse_number(last.group(1))
        else:
            continue
        steps.append(AnswerStep(len(steps) + 1, line, operands, value, final is not None))
    return steps


def oracle_feedback(question: str, answer: str, gold: GoldSolution, correct: bool | None = None) -> Feedback:
    """The oracle's feedback on ``answer`` to ``question`` (see the module docstring). ``correct``: the
    env's verdict on the answer; None: the math grader's, against ``gold.answer``."""
    if not isinstance(question, str) or not isinstance(answer, str):
        raise ValueError("oracle_feedback: question and answer must be str")
    rng = random.Random(hashlib.sha256(f"{question}\0{answer}".encode()).digest())
    if correct is None:
        parsed = extract_answer(answer[:MAX_ANSWER_CHARS])
        correct = parsed is not None and answers_equal(parsed, format_number(gold.answer))
    if correct:
        return Feedback(rng.choice(CORRECT_PHRASES), CORRECT)
    steps = answer_steps(answer)
    if not steps:
        return Feedback(rng.choice(GENERIC_PHRASES), GENERIC)
    known = {s.value for s in gold.steps} | {gold.answer} | set(_numbers(question[:MAX_ANSWER_CHARS]))
    wrong = next((s for s in steps if s.value not in known), None)
    if wrong is None:
        wrong, expected = steps[-1], gold.answer
    else:
        expected = expected_value(wrong, gold)
    quote = wrong.text if len(wrong.text) <= MAX_QUOTE_CHARS else wrong.text[:MAX_QUOTE_CHARS - 3] + "..."
    text = rng.choice(STEP_PHRASES).format(step=wrong.number, quote=quote, got=format_number(wrong.value),
                                           expected=format_number(expected))
    return Feedback(text, STEP, wrong, expected)


def verdict_feedback(question: str, answer: str, correct: bool) -> Feedback:
    """Feedback from the final-answer verdict alone (for problems with no gold steps, e.g. MATH): a CORRECT
    or a GENERIC phrase, chosen as ``oracle_feedback`` chooses (seeded by question and answer)."""
    if not isinstance(question, str) or not isinstance(answer, str) or not isinstance(correct, bool):
        raise ValueError("verdict_feedback: question and answer must be str and correct a bool")
    rng = random.Random(hashlib.sha256(f"{question}\0{answer}".encode()).digest())
    return Feedback(rng.choice(CORRECT_PHRASES), CORRECT) if correct else Feedback(rng.choice(GENERIC_PHRASES), GENERIC)


def expected_value(step: AnswerStep, gold: GoldSolution) -> Fraction:
    """What ``step`` should have stated: the gold step with its operands (any order), else the gold step at
    its position, else (past the gold steps, or a final-answer line) the gold answer."""
    if step.final:
        return gold.answer
    for g in gold.steps:
        if step.operands and sorted(g.operands) == sorted(step.operands):
            return g.value
    return gold.steps[step.number - 1].value if step.number <= len(gold.steps) else gold.answer


def _numbers(text: str) -> tuple[Fraction, ...]:
    """The unsigned numbers written in ``text`` (operands are compared by magnitude, in any order)."""
    return tuple(parse_number(m.group()) for m in _OPERAND_RE.finditer(text))
