"""TEMPORARY stand-in written by helper H2 to the plan's contract until H1's buffers/step_pairs.py lands on
main; it is deleted before main is merged in. Only what the step-data builders need."""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StepPair:
    """A better step (chosen) and a worse sibling (rejected) under the same prefix of steps."""

    question: str
    prefix: tuple[str, ...]
    chosen: str
    rejected: str
    margin: float = 1.0
    source: str = ""
    problem_id: str = ""


@dataclass(frozen=True)
class RatedSteps:
    """A solution's steps with a label in [0, 1] per step (None: unrated)."""

    question: str
    steps: tuple[str, ...]
    labels: tuple[float | None, ...]
    source: str = ""
    problem_id: str = ""


def split_by_problem(items: Sequence, held_out_fraction: float, seed: int) -> tuple[list, list]:
    """(train, held_out): about held_out_fraction of the problem ids go to held_out, never both."""
    ids = sorted({item.problem_id for item in items})
    random.Random(seed).shuffle(ids)
    held = set(ids[:round(len(ids) * held_out_fraction)])
    return [i for i in items if i.problem_id not in held], [i for i in items if i.problem_id in held]
