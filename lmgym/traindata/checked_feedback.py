"""The oracle's feedback with its work shown: the critic recomputes each step of the answer before its verdict.

Why (benchmarks/RESULTS.md, "Reflection with a trained critic"): a 135M critic trained on the plain oracle
(`lmgym.traindata.oracle_feedback`) must give its verdict in one go ("Step 3 is wrong ... should be 12" or "correct,
keep it"), and after SFT it rejected right answers more often than it fixed wrong ones. Here the target first
redoes each step's operation, "Check: 2 * 5 = 10; 5 + 10 = 15; 15 - 3 = 12, not 14.", and then gives the verdict,
so the critic computes before it judges (a verifier that writes its reasoning first, as generative verifiers
do) and each step is judged on its own.

The text, for a step-by-step answer (steps read by `oracle_feedback.answer_steps`, bounded):
- "Check: " and each step up to the one the oracle calls wrong (all of them for a right answer), written as
  its own left-hand side "= " the value that side really gives; ", not <stated>" when the answer stated
  another value. A step with no "a op b = c" to redo is quoted as it is.
- then the verdict, kept short: a CORRECT one ("All right; keep it.") or the wrong step and its gold value
  ("Step 3 should give 12, not 14; redo from step 3."). On 300 level-4 train problems the whole text took at
  most 62 tokens of the embedded model's tokenizer (mean 50; the plain oracle's at most 44), with a slip in
  the last step, which shows every step: give the critic's turn room (reflection_dpo.py --max_new_tokens 96).
The verdict and the step it names are the oracle's (`oracle_feedback`); only the text differs. An answer
with no step at all gets the oracle's generic feedback.
"""
from __future__ import annotations

import hashlib
import random

from lmgym.traindata.oracle_feedback import (
    CORRECT,
    GENERIC,
    AnswerStep,
    Feedback,
    GoldSolution,
    answer_steps,
    oracle_feedback,
)
from lmgym.traindata.step_data.equations import evaluate, find_equations, format_number

CHECKED_CORRECT_PHRASES = ("All right; keep it.", "Every step is right; keep this answer.")
CHECKED_STEP_PHRASES = ("Step {step} should give {expected}, not {got}; redo from step {step}.",
                        "So step {step} is wrong: {expected}, not {got}. Redo from step {step}.")
MAX_CHECKED_STEPS = 8  # steps written out at most (an answer's first 8 steps; the verdict follows)


def check_step(step: AnswerStep) -> str:
    """One step redone: its last "a op b ... = c" as "a op b ... = <what it gives>", with ", not <c>" when the
    answer stated another value; the step's own text when it has no such equation (or divides by zero)."""
    equations = find_equations(step.text)
    value = evaluate(equations[-1].numbers, equations[-1].ops) if equations else None
    if value is None:
        return step.text
    start, end = equations[-1].lhs_span
    lhs = step.text[start:end].strip()
    return f"{lhs} = {format_number(value)}" + ("" if value == step.value else f", not {format_number(step.value)}")


def checked_feedback(question: str, answer: str, gold: GoldSolution, correct: bool | None = None) -> Feedback:
    """The oracle's verdict on ``answer`` with each step redone first (see the module docstring)."""
    verdict = oracle_feedback(question, answer, gold, correct)
    if verdict.kind == GENERIC:
        return verdict
    rng = random.Random(hashlib.sha256(f"checked\0{question}\0{answer}".encode()).digest())
    steps = [s for s in answer_steps(answer) if not s.final]
    if verdict.kind == CORRECT:
        shown = steps
        tail = rng.choice(CHECKED_CORRECT_PHRASES)
    else:
        wrong = verdict.step
        shown = [s for s in steps if s.number < wrong.number] + ([] if wrong.final else [wrong])
        tail = rng.choice(CHECKED_STEP_PHRASES).format(step=wrong.number, expected=format_number(verdict.expected),
                                                       got=format_number(wrong.value))
    work = "; ".join(check_step(s) for s in shown[:MAX_CHECKED_STEPS])
    text = f"Check: {work}. {tail}" if work else tail
    return Feedback(text, verdict.kind, verdict.step, verdict.expected)

