"""Playing engine branches to their end while recording each step's text, shared by the rollout-label
builders (`shepherd`, `policy_labels`): every live branch advances in one batched `engine.advance` per round."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from lmgym.episodes.engine import Branch, EpisodeEngine
from lmgym.episodes.env_state import set_branch_state


@dataclass
class PlayedBranch:
    """A branch and the text of each of its steps (the action and what the env wrote after it)."""

    branch: Branch
    steps: list[str] = field(default_factory=list)

    def copy(self, member: int) -> PlayedBranch:
        """An independent copy (Branch.snapshot) with its own sampling key `member`."""
        branch = self.branch.snapshot()
        branch.member = member
        return PlayedBranch(branch, list(self.steps))


def play_to_end(engine: EpisodeEngine, played: list[PlayedBranch], generator: torch.Generator | None = None,
                sample_key: int | None = None,
                after_step: Callable[[PlayedBranch], None] | None = None) -> int:
    """Play every live branch to its end (`EpisodeEngine.play`: continuously where the policy can), recording
    each step's text; `after_step(p)` runs after each step of each branch. Returns the sampling rounds."""
    by_branch = {id(p.branch): p for p in played}
    seen = {id(p.branch): len(p.branch.text) for p in played}

    def record(branch: Branch) -> None:
        p = by_branch[id(branch)]
        p.steps.append(branch.text[seen[id(branch)]:])
        seen[id(branch)] = len(branch.text)
        if after_step is not None:
            after_step(p)

    return engine.play([p.branch for p in played], generator, sample_key, after_step=record)


def ended_right(branch: Branch) -> bool:
    """The env ended the episode and graded it correct."""
    return branch.done and branch.outcome.correct


def reset_question(env, branch: Branch) -> str:
    """The reset observation of a fresh branch, verbatim."""
    set_branch_state(env, branch.state)
    return str(env.unwrapped.render())
