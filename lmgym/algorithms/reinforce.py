"""REINFORCE-stable (seed 002): REINFORCE with a baseline and a KL to a periodically re-synced reference."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from lmgym.algorithms.advantages import discounted_returns, global_moments
from lmgym.algorithms.base import RLAlgorithm
from lmgym.algorithms.config import RLConfig
from lmgym.algorithms.replay import truncated_importance_weights
from lmgym.training import distributed as dist
from lmgym.training.config import setting


@dataclass
class ReinforceStableConfig(RLConfig):
    """REINFORCE-stable settings: the reference is re-synced to the policy every `ref_sync_every`
    iterations, so the KL keeps each phase close to where it started without pinning the policy forever."""

    kl_coeff: float = 0.05              # beta of the KL to the (periodically re-synced) reference, in the loss
    ref_sync_every: int = 2             # copy policy -> reference every N iterations
    gamma: float = setting(1.0, "discount over steps (stepwise envs), in (0, 1]")
    normalize_advantages: bool = setting(True, "divide (return - baseline) by the batch std")
    samples_per_prompt: int = 1         # one episode per prompt (the baseline is the batch mean)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require("gamma", 0 < self.gamma <= 1, "in (0, 1]")


class ReinforceStable(RLAlgorithm):
    """Policy gradient -log pi(a) * (G_t - b), b the batch-mean return."""

    config_class = ReinforceStableConfig

    def advantages(self, batch):
        """Discounted returns minus the batch's mean reward, divided by its std: statistics of the whole
        iteration's batch, every rank's share included (so they do not change with the world size)."""
        returns = discounted_returns(batch.token_rewards, batch.loss_mask, self.config.gamma)
        if dist.world_size() > 1:
            n, baseline, squares = global_moments(batch.rewards.float(), torch.ones_like(batch.rewards.float()))
            std = (squares / (n - 1)) ** 0.5 if n > 1 else 0.0
        else:
            n, baseline, std = batch.size, batch.rewards.mean(), batch.rewards.std() if batch.size > 1 else 0.0
        adv = (returns - baseline) * batch.loss_mask
        if self.config.normalize_advantages and n > 1:
            adv = adv / (std + 1e-4)
        return adv

    def loss(self, batch, logprobs, entropy):
        """-w * log pi(a) * A, w = 1 for this iteration's episodes and the truncated importance ratio for
        replayed ones (`replay_iterations`; the seed's cached episodes)."""
        weights = truncated_importance_weights(logprobs, batch.old_logprobs, batch.iterations < self.iteration)
        return {"policy": -weights * logprobs * batch.advantages}
