"""What the search methods share: advancing branches while counting each problem's sampled tokens,
asking a step scorer for scores (checked), and turning a chosen branch into a `SearchResult`.

Branches of problem i carry group id i (the engine's `start` with first_group_id 0), so per-problem token
counts are a list indexed by group id. A candidate snapshot counts only the tokens it samples after the
snapshot: the difference of `sampled_tokens` across each advance.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from lmgym.episodes.engine import Branch, EpisodeEngine
from lmgym.search.search_types import SearchResult, StepScorer, sampled_tokens
from lmgym.training.config import shown


def advance_counting(engine: EpisodeEngine, branches: Sequence[Branch], tokens: list[int],
                     generator: torch.Generator | None) -> list[Branch]:
    """One `engine.advance` of `branches` (one sampling call per role); adds each branch's newly sampled
    tokens to `tokens[branch.group_id]`. Returns the branches advanced."""
    before = [sampled_tokens(b) for b in branches]
    advanced = engine.advance(branches, generator)
    for branch, count in zip(branches, before):
        tokens[branch.group_id] += sampled_tokens(branch) - count
    return advanced


def play_out(engine: EpisodeEngine, branches: Sequence[Branch], tokens: list[int],
             generator: torch.Generator | None) -> None:
    """Play all `branches` to their end (`EpisodeEngine.play`), adding each one's sampled tokens to
    `tokens[branch.group_id]`."""
    before = [sampled_tokens(b) for b in branches]
    engine.play(branches, generator)
    for branch, count in zip(branches, before):
        tokens[branch.group_id] += sampled_tokens(branch) - count


def step_scores(scorer: StepScorer, branches: Sequence[Branch]) -> list[list[float]]:
    """The scorer's per-step scores of `branches` (one call), checked (`checked_scores`)."""
    if not branches:
        return []
    return checked_scores(scorer.score_branches(list(branches)), branches)


def parsed_answer(branch: Branch) -> str | None:
    """The answer the env parsed from the branch's finished solution (parsed without the gold), or None."""
    return branch.outcome.parsed_answer


def result_of(branch: Branch, tokens: int, details: dict[str, Any] | None = None) -> SearchResult:
    """The `SearchResult` choosing `branch`; its correctness is the env's verdict, read only to report."""
    trajectory = branch.to_trajectory()
    return SearchResult(trajectory=trajectory, answer=trajectory.outcome.parsed_answer,
                        correct=trajectory.outcome.correct, tokens=int(tokens), details=dict(details or {}))


def checked_scores(scores, branches: Sequence[Branch]) -> list[list[float]]:
    """A scorer's output, checked: one list per branch, one finite score in [0, 1] per step taken."""
    scores = list(scores)
    if len(scores) != len(branches):
        raise ValueError(f"step scorer returned {len(scores)} score lists for {len(branches)} branches")
    for i, (row, branch) in enumerate(zip(scores, branches)):
        row = list(row)
        if len(row) != branch.steps:
            raise ValueError(f"step scorer returned {len(row)} scores for branch {i} with {branch.steps} steps")
        bad = [s for s in row if not _unit_number(s)]
        if bad:
            raise ValueError(f"step scorer returned {shown(bad[0])} for branch {i}; scores must be numbers in [0, 1]")
    return [[float(s) for s in row] for row in scores]


def _unit_number(value) -> bool:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, (bool, str)) and 0.0 <= number <= 1.0
