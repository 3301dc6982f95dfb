"""SFT data for the reflection roles, from the programmatic oracle (`lmgym.traindata.oracle_feedback`):

- critic: (question, the actor's answer) -> the oracle's feedback on it;
- actor refinement: (question, answer, feedback) -> the gold solution.

A problem without gold steps but with a worked "solution" text (MATH) gets feedback from the final-answer
verdict alone (`verdict_feedback`: "correct, keep it" or "wrong, redo it step by step"; the row needs the
env's verdict) and that solution as the refinement target.

Feedback style (`FEEDBACK_STYLES`): "oracle", the oracle's verdict text alone; "checked", each step of the
answer redone before the verdict (`lmgym.traindata.checked_feedback`), so the critic computes before it judges. The
actor's refinement examples use the same style, as the critic it will read writes it.

A `ReflectionTurnExample` is one role's turn inside a `ReflectionEnv` episode: the task prompt, the actions
before it (actor and critic alternating), the env's requests and the target text. `turn_tokens` lays it out
exactly as the episode engine does for the role at that turn: `policy.format_prompt(prompt)`, then each
earlier action as the model writes it after SFT (its text, then the end-of-sequence token that ends it),
each followed by the env's request (raw text, or a chat turn with `turn_role`); only the target (and its
end-of-sequence token) is in the loss.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lmgym.buffers import Trajectory
from lmgym.envs.base import Problem
from lmgym.envs.reflection import ACTOR, ReflectionEnv, raw_request, role_of_action
from lmgym.traindata.checked_feedback import checked_feedback
from lmgym.traindata.oracle_feedback import gold_solution, oracle_feedback, verdict_feedback

# the critic's target text: the oracle's verdict alone, or each step redone first (traindata/checked_feedback.py);
# MATH rows (no gold steps) get the verdict-only feedback in either style
FEEDBACK_STYLES = ("oracle", "checked")


@dataclass(frozen=True)
class ReflectionTurnExample:
    """One role's turn of a reflection episode: what it saw (prompt, earlier actions, the env's requests and
    how they are written) and the text it should write (``target``)."""

    prompt: str
    actions: tuple[str, ...]
    target: str
    critic_request: str
    refine_request: str
    turn_role: str | None = None

    @property
    def role(self) -> str:
        """Who writes ``target``: the actor after an even number of actions, else the critic."""
        return role_of_action(len(self.actions))


@dataclass(frozen=True)
class AnswerRow:
    """An actor's answer to a problem; ``correct`` is the env's verdict (None: the oracle grades it)."""

    problem: Problem
    answer: str
    correct: bool | None = None


def turn_tokens(policy: Any, example: ReflectionTurnExample) -> tuple[list[int], list[int]]:
    """(ids, weights) of ``example`` as the episode engine lays the turn out (module docstring): weight 1 on
    the target's tokens and its end-of-sequence token, 0 elsewhere."""
    eos = policy.tokenizer.eos_token_id
    ids = list(policy.format_prompt(example.prompt))
    for index, action in enumerate(example.actions):
        ids += _ended(policy.encode_text(action), eos)
        request = example.critic_request if role_of_action(index) == ACTOR else example.refine_request
        if example.turn_role is None:
            ids += policy.encode_text(raw_request(request))
        else:
            ids += policy.encode_turn(request, example.turn_role, after=ids)
    target = _ended(policy.encode_text(example.target), eos)
    return ids + target, [0] * len(ids) + [1] * len(target)


def critic_sft_examples(env: ReflectionEnv, rows: Iterable[AnswerRow],
                        style: str = "oracle") -> list[ReflectionTurnExample]:
    """Critic examples: after each row's answer (the episode's first), the oracle's feedback on it, in
    `style` (FEEDBACK_STYLES: "oracle", the verdict alone; "checked", each step redone first)."""
    return _oracle_examples(env, rows, style, actor=False)


def actor_refinement_sft_examples(env: ReflectionEnv, rows: Iterable[AnswerRow],
                                  style: str = "oracle") -> list[ReflectionTurnExample]:
    """Actor examples: after each row's answer and the oracle's feedback on it (in `style`, as the critic is
    trained to write it), the gold solution."""
    return _oracle_examples(env, rows, style, actor=True)


def _oracle_examples(env: ReflectionEnv, rows: Iterable[AnswerRow], style: str,
                     actor: bool) -> list[ReflectionTurnExample]:
    """Each row's example after its answer: the actor's (the oracle's feedback, then the gold solution as
    target) or the critic's (the feedback as target)."""
    env = _reflection_env(env)
    examples = []
    for number, row in enumerate(rows):
        prompt, feedback, gold_text = _oracle(env, row, number, style)
        actions, target = ((row.answer, feedback), gold_text) if actor else ((row.answer,), feedback)
        examples.append(_example(env, prompt, actions, target))
    return examples


def answer_rows(episodes: Iterable[Trajectory | Mapping[str, Any]], env: ReflectionEnv) -> list[AnswerRow]:
    """The first answer of each finished ``env`` episode (a Trajectory or its info), with the env's verdict;
    the problem is found by the episode's ``problem_id``."""
    env = _reflection_env(env)
    by_id: dict[str, Problem] | None = None
    rows = []
    for number, episode in enumerate(episodes):
        info = episode.info if isinstance(episode, Trajectory) else episode
        steps = info.get("steps") if isinstance(info, Mapping) else None
        verdicts = info.get("turn_correct") if isinstance(info, Mapping) else None
        if not isinstance(steps, list) or not steps or not isinstance(verdicts, list) or not verdicts:
            raise ValueError(f"episode {number}: not a ReflectionEnv episode (info needs steps and turn_correct)")
        if by_id is None:
            by_id = {p.problem_id: p for p in map(env.get_problem, range(env.num_problems))}
        problem = by_id.get(info.get("problem_id"))
        if problem is None:
            raise ValueError(f"episode {number}: problem {info.get('problem_id')!r} is not one of the env's")
        rows.append(AnswerRow(problem, str(steps[0]), bool(verdicts[0])))
    return rows


def _oracle(env: ReflectionEnv, row: AnswerRow, number: int, style: str = "oracle") -> tuple[str, str, str]:
    if style not in FEEDBACK_STYLES:
        raise ValueError(f"feedback style must be one of {', '.join(FEEDBACK_STYLES)}; got {style!r}")
    if not isinstance(row, AnswerRow):
        raise ValueError(f"row {number}: expected an AnswerRow; got {type(row).__name__}")
    prompt = env.build_prompt(row.problem)
    if not isinstance(prompt, str):
        raise ValueError(f"row {number}: reflection SFT needs a text prompt; {row.problem.problem_id} has messages")
    solution = _worked_solution(row.problem)
    if solution is not None:
        if row.correct is None:
            raise ValueError(f"row {number}: {row.problem.problem_id} has no gold steps; the row needs its verdict")
        return prompt, verdict_feedback(str(row.problem.question), row.answer, row.correct).text, solution
    gold = gold_solution(row.problem)
    feedback = (checked_feedback if style == "checked" else oracle_feedback)(str(row.problem.question), row.answer,
                                                                             gold, row.correct)
    return prompt, feedback.text, gold.text


def gold_text(problem: Problem) -> str:
    """The solution the actor should write for ``problem``: the oracle's gold solution (Arithmetic-v0, GSM8K),
    else the row's worked "solution" text (MATH); ValueError (one line) when it has neither."""
    solution = _worked_solution(problem)
    return solution if solution is not None else gold_solution(problem).text


def _worked_solution(problem: Problem) -> str | None:
    """A row's free-text "solution" (MATH) when it has no gold steps (no GSM8K "####" answer); else None."""
    fields = problem.fields or {}
    answer, solution = fields.get("answer"), fields.get("solution")
    if isinstance(answer, str) and "####" in answer:
        return None
    return solution.strip() if isinstance(solution, str) and solution.strip() else None


def _example(env: ReflectionEnv, prompt: str, actions: tuple[str, ...], target: str) -> ReflectionTurnExample:
    return ReflectionTurnExample(prompt, actions, target, env.critic_request, env.refine_request, env.turn_role)


def _reflection_env(env: Any) -> ReflectionEnv:
    unwrapped = getattr(env, "unwrapped", env)
    if not isinstance(unwrapped, ReflectionEnv):
        raise ValueError(f"reflection SFT data needs a ReflectionEnv; got {type(env).__name__}")
    return unwrapped


def _ended(ids: list[int], eos: int | None) -> list[int]:
    return ids + [eos] if eos is not None and (not ids or ids[-1] != eos) else list(ids)
