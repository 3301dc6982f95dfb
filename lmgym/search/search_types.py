"""What every search method shares: the step scorer it may consult and the result it returns.

A step scorer (the process reward model, or a scripted one in tests) scores each reasoning step of
episodes in progress; search methods (best-of-N, beam, MCTS) call it on engine branches. Every method
returns one `SearchResult` per problem, with the tokens it sampled for that problem, so methods can be
compared at equal token budgets. No method may read the env's reward or correctness to choose its
answer at inference: they are recorded for reporting only.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from lmgym.buffers import Trajectory
from lmgym.episodes.engine import Branch


@runtime_checkable
class StepScorer(Protocol):
    """Scores the steps of episodes: for each branch, one score in [0, 1] per step taken (the estimated
    chance that the solution so far leads to a correct answer), in the branch's step order."""

    def score_branches(self, branches: Sequence[Branch]) -> list[list[float]]:
        ...


def sampled_tokens(branch: Branch) -> int:
    """Tokens the policy sampled in `branch` (env-injected tokens excluded)."""
    return int(sum(branch.mask))


@dataclass
class SearchResult:
    """One problem's answer from a search method.

    trajectory: the chosen solution as an episode (its info holds the env's verdict, for reporting).
    answer: the parsed final answer (None: no answer). correct: the env's verdict on it.
    tokens: every token sampled for this problem, discarded candidates included.
    details: method-specific numbers (e.g. simulations, tree size, votes).
    """

    trajectory: Trajectory | None
    answer: str | None
    correct: bool
    tokens: int
    details: dict[str, Any] = field(default_factory=dict)
