"""REINFORCE-stable (seed 002): REINFORCE with a baseline and a KL to a periodically re-synced reference."""
from __future__ import annotations

from dataclasses import dataclass

from algorithms.advantages import discounted_returns
from algorithms.base import RLAlgorithm
from algorithms.config import RLConfig, setting
from algorithms.replay import truncated_importance_weights


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
        returns = discounted_returns(batch.token_rewards, batch.loss_mask, self.config.gamma)
        baseline = batch.rewards.mean()
        adv = (returns - baseline) * batch.loss_mask
        if self.config.normalize_advantages and batch.size > 1:
            std = batch.rewards.std()
            adv = adv / (std + 1e-4)
        return adv

    def loss(self, batch, logprobs, entropy):
        """-w * log pi(a) * A, w = 1 for this iteration's episodes and the truncated importance ratio for
        replayed ones (`replay_iterations`; the seed's cached episodes)."""
        weights = truncated_importance_weights(logprobs, batch.old_logprobs, batch.iterations < self.iteration)
        return {"policy": -weights * logprobs * batch.advantages}
