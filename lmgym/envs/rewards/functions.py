"""Reward functions: plain functions ``(completion, gold, info) -> float``.

An env sums its reward functions' values with its ``reward_weights`` (``envs/base.py``). Training can
instead combine the components over a whole batch (``reward_combination``): that pipeline, and its one
``combine``, is in ``algorithms/reward_combination.py``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from lmgym.envs.answers import answers_equal
from lmgym.envs.extraction import MAX_SCAN_CHARS, extract_answer, find_boxes
from lmgym.envs.rewards.forms import RewardFn, reads_only

__all__ = ["RewardFn", "correctness_reward", "accuracy_reward", "format_reward"]

_HASH_ANSWER_RE = re.compile(r"####[ \t]*\S")


@reads_only
def correctness_reward(completion: str, gold: str, info: dict | None = None) -> float:
    """1.0 if the final answer in ``completion`` equals ``gold``, else 0.0.

    Inside an env, ``info["correct"]`` holds the env's verdict for this very
    completion (graded once per step) and is used as is; called standalone
    (no such key), the answer is extracted and graded here.
    """
    verdict = info.get("correct") if isinstance(info, Mapping) else None
    if isinstance(verdict, bool):
        return 1.0 if verdict else 0.0
    return 1.0 if answers_equal(extract_answer(completion), gold) else 0.0


@reads_only
def accuracy_reward(completion: str, gold: str, info: dict | None = None) -> float:
    """TRL's ``accuracy_reward`` on a data set's rows: 1.0 if the final answer in ``completion`` equals the
    row's ``solution`` column (its final answer as ``extract_answer`` finds it, else the whole text), the
    column TRL's reads; a row without one is graded as ``correctness_reward`` grades it (against ``gold``)."""
    fields = info.get("fields") if isinstance(info, Mapping) else None
    solution = fields.get("solution") if isinstance(fields, Mapping) else None
    if not isinstance(solution, str) or not solution.strip():
        return correctness_reward(completion, gold, info)
    target = extract_answer(solution) or solution.strip()
    return 1.0 if answers_equal(extract_answer(completion), target) else 0.0


@reads_only
def format_reward(completion: str, gold: str, info: dict | None = None) -> float:
    """1.0 if ``completion`` marks a final answer with ``####`` or ``\\boxed{}`` that can be extracted.

    Linear in the completion's length (one regex pass and one brace-matching pass); reads
    the last ``MAX_SCAN_CHARS`` characters, as ``extract_answer`` does.
    """
    if not isinstance(completion, str):
        return 0.0
    if len(completion) > MAX_SCAN_CHARS:  # read like extract_answer: the end of the text
        completion = completion[-MAX_SCAN_CHARS:]
    if not (_HASH_ANSWER_RE.search(completion) or _has_boxed_answer(completion)):
        return 0.0
    return 1.0 if extract_answer(completion) is not None else 0.0


def _has_boxed_answer(text: str) -> bool:
    """True if some ``\\boxed{...}`` has balanced braces and non-blank content."""
    return any(box.braced and box.content.strip() for box in find_boxes(text))
