"""Step preferences from gold solutions: each gold step against a corrupted sibling under the same prefix.

Corruptions of gold step i (each skipped where it cannot apply or leaves the step unchanged):
- "wrong_number": a result changed (the right side of one of its equations, else its last number);
- "wrong_operation": one operator of an equation swapped (+ <-> -, * <-> /) and the result recomputed
  with the swapped operator, so the step is consistent with itself but wrong;
- "dropped_step": gold step i + 1 in place of step i (a step skipped).

Sources: GSM8K solutions (the answer field's lines, calculator annotations removed, last line
"#### N") and Arithmetic-v0 levels (gold solutions from `arithmetic_gold`). Each problem's corruptions
come from a generator seeded by (seed, problem id), so they do not depend on which problems are built.
"""
from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from pathlib import Path

from lmgym.buffers.step_pairs import StepPair
from lmgym.envs.arithmetic import ArithmeticEnv
from lmgym.envs.math import GSM8KEnv
from lmgym.policies.few_shot import gsm8k_solution_steps as few_shot_solution
from lmgym.traindata.step_data.arithmetic_gold import problem_gold_steps
from lmgym.traindata.step_data.equations import (
    NUMBER_RE,
    SWAPPED_OP,
    decimals_of,
    evaluate,
    find_equations,
    format_number,
    parse_number,
)

KINDS = ("wrong_number", "wrong_operation", "dropped_step")
NUMBER_OFFSETS = (1, 2, 3, 5, 10)


def gsm8k_solution_steps(answer: str) -> tuple[str, ...]:
    """A GSM8K answer field as steps: lmgym.policies.few_shot's one-step-per-line solution (annotations removed,
    the last line "#### N"), each step ending in a line break. ValueError without a '#### N' line."""
    return tuple(line + "\n" for line in few_shot_solution(answer).split("\n"))


def problem_rng(seed: int, problem_id: str) -> random.Random:
    """The generator of one problem's corruptions (the same for the same seed and problem id)."""
    return random.Random(f"{seed}:{problem_id}")


def _replace(line: str, span: tuple[int, int], text: str) -> str:
    return line[:span[0]] + text + line[span[1]:]


def wrong_number(step: str, rng: random.Random) -> str | None:
    """`step` with one result changed (an equation's right side, else the last number); None if it has no number."""
    equations = find_equations(step)
    if equations:
        span = rng.choice(equations).rhs_span
    else:
        numbers = list(NUMBER_RE.finditer(step))
        if not numbers:
            return None
        span = numbers[-1].span()
    written = step[span[0]:span[1]]
    value = parse_number(written)
    offset = rng.choice(NUMBER_OFFSETS) * rng.choice((-1, 1))
    if value >= 0 > value + offset:
        offset = -offset  # a count stays non-negative
    return _replace(step, span, format_number(value + offset, decimals_of(written)))


def wrong_operation(step: str, rng: random.Random) -> str | None:
    """`step` with one operator of an equation swapped and that equation's result recomputed with it;
    None if no swap changes a result (or the step has no equation)."""
    candidates = [(eq, i) for eq in find_equations(step) for i in range(len(eq.ops))]
    rng.shuffle(candidates)
    for equation, index in candidates:
        ops = list(equation.ops)
        ops[index] = SWAPPED_OP[ops[index]]
        right, wrong = evaluate(equation.numbers, equation.ops), evaluate(equation.numbers, ops)
        if wrong is None or wrong == right:
            continue
        result = format_number(wrong)
        # replace the result first: it lies after the operator, so the operator's span stays valid
        changed = _replace(step, equation.rhs_span, result)
        return _replace(changed, equation.op_spans[index], ops[index])
    return None


def corruptions(steps: Sequence[str], index: int, rng: random.Random,
                kinds: Iterable[str] = KINDS) -> dict[str, str]:
    """Corrupted siblings of steps[index], by kind, each different from the gold step."""
    found: dict[str, str] = {}
    gold = steps[index]
    for kind in kinds:
        if kind == "wrong_number":
            text = wrong_number(gold, rng)
        elif kind == "wrong_operation":
            text = wrong_operation(gold, rng)
        elif kind == "dropped_step":
            text = steps[index + 1] if index + 1 < len(steps) else None
        else:
            raise ValueError(f"unknown corruption kind {kind!r}; choose from {', '.join(KINDS)}")
        if text is not None and text != gold:
            found[kind] = text
    return found


def gold_step_pairs(question: str, steps: Sequence[str], problem_id: str, seed: int = 0, source: str = "gold",
                    kinds: Iterable[str] = KINDS) -> list[StepPair]:
    """For every gold step, one StepPair per corruption kind (prefix: the gold steps before it); each pair's
    source is "<source>_<kind>"."""
    kinds = tuple(kinds)
    rng, pairs = problem_rng(seed, problem_id), []
    for index, step in enumerate(steps):
        for kind, text in corruptions(steps, index, rng, kinds).items():
            pairs.append(StepPair(question=question, prefix=tuple(steps[:index]), chosen=step, rejected=text,
                                  source=f"{source}_{kind}", problem_id=problem_id))
    return pairs


def gsm8k_pairs(data_path: str | Path, split: str = "train", subset: tuple[int, int] | None = None, seed: int = 0,
                kinds: Iterable[str] = KINDS) -> list[StepPair]:
    """Gold-vs-corrupted step pairs of GSM8K rows (`subset`: [start, stop) rows; None: all). The question is
    the GSM8KStepwise-v0 reset observation of the row, verbatim; source "gsm8k_<kind>"."""
    env = GSM8KEnv(data_path, split, subset=subset, mode="stepwise")
    pairs: list[StepPair] = []
    for index in range(env.num_problems):
        question, _ = env.reset(options={"index": index})
        problem = env.get_problem(index)
        steps = gsm8k_solution_steps(str(problem.fields["answer"]))
        pairs += gold_step_pairs(question, steps, problem.problem_id, seed, "gsm8k", kinds)
    return pairs


def arithmetic_pairs(levels: Iterable[int], problems_per_level: int, split: str = "train", seed: int = 0,
                     kinds: Iterable[str] = KINDS) -> list[StepPair]:
    """Gold-vs-corrupted step pairs of `problems_per_level` Arithmetic-v0 problems of each level (a seeded
    sample of the split), in the stepwise env's format; source "arithmetic_<kind>"."""
    if isinstance(problems_per_level, bool) or not isinstance(problems_per_level, int) or problems_per_level < 1:
        raise ValueError(f"problems_per_level must be an int >= 1; got {problems_per_level!r}")
    pairs: list[StepPair] = []
    for level in levels:
        env = ArithmeticEnv(level, split, mode="stepwise")
        count = min(problems_per_level, env.num_problems)
        for index in sorted(random.Random(f"{seed}:L{level}").sample(range(env.num_problems), count)):
            question, _ = env.reset(options={"index": index})
            problem = env.get_problem(index)
            steps = problem_gold_steps(problem)
            pairs += gold_step_pairs(question, steps, problem.problem_id, seed, "arithmetic", kinds)
    return pairs
