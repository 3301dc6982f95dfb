"""Reward functions and how an env calls them.

- `functions`: the plain per-sample reward functions ``(completion, gold, info) -> float`` (`RewardFn`):
  `correctness_reward`, `accuracy_reward` (TRL's name, on a row's ``solution``), `format_reward`;
- `forms`: the two forms a reward function may take (per sample, or TRL's ``fn(prompts, completions,
  **kwargs)``) and how an env calls either;
- `guard`: calling one without letting it crash or stall the episode (time limits, contained errors);
- `batch`: TRL-style reward functions scored once per batch of finished episodes.

The HotpotQA envs' own rewards (exact match, F1, retrieval MRR and recall) are in `lmgym.envs.hotpotqa.rewards`.
"""
import importlib
from typing import TYPE_CHECKING

from lmgym.envs.rewards.forms import RewardFn, TRLReward, per_sample_reward, reward_form, trl_reward
from lmgym.envs.rewards.guard import RewardTimeout

if TYPE_CHECKING:  # loaded on first use: the env base imports this package's plumbing, not the math grader
    from lmgym.envs.rewards.functions import accuracy_reward, correctness_reward, format_reward

__all__ = ["RewardFn", "correctness_reward", "accuracy_reward", "format_reward", "TRLReward", "per_sample_reward",
           "reward_form", "trl_reward", "RewardTimeout"]


def __getattr__(name: str):
    """`correctness_reward`, `accuracy_reward` and `format_reward`, loaded (with the math grader) on first use."""
    if name in ("correctness_reward", "accuracy_reward", "format_reward"):
        return getattr(importlib.import_module("lmgym.envs.rewards.functions"), name)
    raise AttributeError(f"module 'lmgym.envs.rewards' has no attribute {name!r}")
