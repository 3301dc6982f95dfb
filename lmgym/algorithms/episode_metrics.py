"""The metrics an RL iteration logs about its episodes: rewards, accuracy, lengths, reward failures."""
from __future__ import annotations

import numpy as np

from lmgym.algorithms.advantages import zero_variance_fraction
from lmgym.training.guards import reward_failures, warn
from lmgym.training.reward_metrics import component_metrics
from lmgym.buffers import Trajectory


def episode_metrics(trajectories: list[Trajectory], iteration: int, grouped: bool) -> dict:
    """Rewards (the env's, combined by `reward_combination`, before KL or length shaping), each reward
    component's mean (`reward_<name>`) and values (`rewards_<name>`), accuracy, lengths, the fraction
    of groups without signal (`grouped`: several samples per prompt) and reward failures (warned about,
    naming `iteration`, counted from 1)."""
    rewards = [t.env_reward for t in trajectories]
    metrics = {
        "reward_mean": float(np.mean(rewards)), "reward_std": float(np.std(rewards)),
        "train_accuracy": float(np.mean([t.outcome.correct for t in trajectories])),
        "completion_length": sum(t.num_generated_tokens for t in trajectories) / max(len(trajectories), 1),
        "truncated_fraction": float(np.mean([t.truncated for t in trajectories])),
        "rewards": [round(r, 4) for r in rewards],
        **component_metrics(trajectories),
    }
    if grouped:
        metrics["zero_variance_groups"] = zero_variance_fraction(trajectories)
    failures, first = reward_failures(trajectories)
    metrics["reward_failures"] = failures
    if failures:
        warn(f"iteration {iteration}: a reward function failed on {failures} of {len(trajectories)} episodes "
             f"(scored 0 for that reward); first: {first}")
    return metrics
