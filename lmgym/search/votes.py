"""Voting over sampled answers, as search's maj@n and weighted maj@n choose one: `majority_answer`, the most
frequent parsed answer; and weighted majority voting (`weighted_majority`): each parsed answer's votes are the
verifier's solution scores summed over the samples that gave it; the answer with the largest sum wins.

Scores are summed as probabilities in [0, 1] (the `StepScorer` contract), never as logits: a logit's
negative part would let a confidently wrong sample cancel other samples' votes, and an unscored
answer would outweigh a poorly scored one. A solution's score is its step scores aggregated (search's
`aggregation`: min, as Math-Shepherd ranks solutions, by default; product, as "Let's verify step by step"
does, is one setting away). Unparsed answers (None) do not vote. Ties go to the answer seen first in
sampling order (the rule `majority_answer` uses), so the result does not depend on dict or float order
beyond the exact sums.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence


def majority_answer(answers: list[str | None]) -> str | None:
    """The most frequent parsed answer (ties: the first seen; unparsed answers do not vote), or None."""
    votes = Counter(a for a in answers if a is not None)
    return votes.most_common(1)[0][0] if votes else None


def weighted_votes(answers: Sequence[str | None], scores: Sequence[float]) -> dict[str, float]:
    """Each parsed answer's summed score, in order of first appearance (None answers left out)."""
    if len(answers) != len(scores):
        raise ValueError(f"weighted_votes: {len(answers)} answers but {len(scores)} scores")
    totals: dict[str, float] = {}
    for answer, score in zip(answers, scores):
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score) \
                or not 0.0 <= score <= 1.0:
            raise ValueError(f"weighted_votes: scores must be probabilities in [0, 1], got {score!r}")
        if answer is not None:
            totals[answer] = totals.get(answer, 0.0) + float(score)
    return totals


def weighted_majority(answers: Sequence[str | None], scores: Sequence[float]) -> str | None:
    """The parsed answer with the largest summed score (ties: the first seen), or None if none parsed."""
    totals = weighted_votes(answers, scores)
    best: str | None = None
    for answer, total in totals.items():  # first-appearance order: a later answer must beat, not tie
        if best is None or total > totals[best]:
            best = answer
    return best
