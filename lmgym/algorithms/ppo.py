"""PPO with a value model: GAE over token rewards, clipped policy and value losses, several epochs per batch.

Token t's state is everything before it; V(s_t) comes from a scalar head on the policy backbone
(one forward pass gives log-probs and values) or from a separate critic (`value_model`). Rewards sit
where the env pays them: the last token of each step (stepwise envs, process rewards) or of the
episode (outcome reward), minus a per-token KL penalty when `kl_in_reward`, plus `prm_weight` times a
process reward model's score of each step at its last token (algorithms/prm/reward.py). Env-injected
tokens are skipped by GAE and masked out of both losses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lmgym.algorithms.advantages import explained_variance, gae, whiten
from lmgym.algorithms.base import RLAlgorithm
from lmgym.algorithms.config import RLConfig
from lmgym.algorithms.losses import clipped_policy_loss, clipped_value_loss, masked_mean
from lmgym.buffers import ADVANTAGES, OLD_VALUES, RETURNS
from lmgym.policies.base import BackbonePolicy
from lmgym.policies.logprobs import sampled_token_outputs
from lmgym.policies.value import build_value_model
from lmgym.training.config import setting


@dataclass
class PPOConfig(RLConfig):
    """PPO settings. KL to the reference is paid per token in the reward by default (k1, RLHF-style)."""

    samples_per_prompt: int = 1       # PPO needs no groups; raise it to reuse prompts
    prompts_per_iteration: int = 64
    update_epochs: int = 4            # passes over each batch; ratios use the behaviour log-probs
    minibatch_size: int = 16          # trajectories per optimizer step (0: the whole batch)
    gamma: float = setting(1.0, "discount per token, in (0, 1]")
    lam: float = setting(0.95, "GAE lambda, in [0, 1]")
    clip_low: float = setting(0.2, "ratio lower bound is 1 - clip_low")
    clip_high: float = setting(0.2, "ratio upper bound is 1 + clip_high")
    dual_clip: float = setting(0.0, "c > 1: bound the loss of negative advantages by -c * A (0: off)")
    value_clip: float = setting(0.2, "clip V - V_old to +-value_clip in the value loss (0: off)")
    value_coeff: float = setting(0.5, "weight of the value loss")
    entropy_coeff: float = setting(0.0, "entropy bonus (subtracted from the loss)")
    whiten_advantages: bool = setting(True, "normalise advantages over the batch's sampled tokens")
    value_model: str = setting("shared", "shared (a head on the policy backbone) | copy (a separate critic) | "
                                         "a model path")
    value_learning_rate: float = setting(0.0, "learning rate of the value model (0: learning_rate)")
    kl_coeff: float = 0.05            # beta of the KL to the reference (per token, in the reward by default)
    kl_in_reward: bool = True         # per-token -beta * k1 in the token rewards

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require("gamma", 0 < self.gamma <= 1, "in (0, 1]")
        self.require("lam", 0 <= self.lam <= 1, "in [0, 1]")
        self.require("clip_low", 0 <= self.clip_low < 1, "in [0, 1)")
        self.require("clip_high", self.clip_high >= 0, ">= 0")
        self.require("dual_clip", self.dual_clip == 0 or self.dual_clip > 1, "0 or > 1")
        self.require("value_clip", self.value_clip >= 0, ">= 0")
        self.require("value_coeff", self.value_coeff > 0, "> 0")
        self.require("entropy_coeff", self.entropy_coeff >= 0, ">= 0")
        self.require("value_model", self.value_model.strip() != "", "shared, copy or a model path")
        self.require("value_learning_rate", self.value_learning_rate >= 0, ">= 0 (0: learning_rate)")


class PPO(RLAlgorithm):
    """Proximal Policy Optimisation (Schulman et al., 2017) for language models.

    `value_model` (a module from lmgym.policies.value) overrides `config.value_model`; `prm` as RLAlgorithm's
    (its step scores are token rewards GAE reads).
    """

    config_class = PPOConfig
    policy_contract = BackbonePolicy  # the value model reads its backbone
    token_fields = (OLD_VALUES, RETURNS)
    kl_reward_per_token = True

    def __init__(self, policy, env=None, config: PPOConfig | None = None, ref_policy=None, buffer=None, eval_env=None,
                 value_model=None, prm=None, callbacks=None, **data: Any):
        """RLAlgorithm's arguments and `value_model`; `data`: RLAlgorithm's train_dataset, eval_dataset and
        reward_funcs."""
        config, policy = self.checked_config(config), self.checked_policy(policy)
        self.value_model = value_model or build_value_model(policy, config.value_model)
        super().__init__(policy, env, config, ref_policy, buffer, eval_env, prm, callbacks, **data)

    def param_groups(self):
        lr = self.config.value_learning_rate or self.config.learning_rate
        return super().param_groups() + [{"params": list(self.value_model.parameters()), "lr": lr}]

    def checkpointed_models(self) -> list:
        """The policy and, when it has its own backbone, the critic (`gradient_checkpointing`)."""
        critic = [] if self.value_model.shares_policy_backbone else [self.value_model]
        return super().checkpointed_models() + critic

    def update(self, trajectories):
        """RLAlgorithm's update with the critic in training mode too, as the policy is (its checkpointed layers
        recompute in training mode only)."""
        self.value_model.train()
        try:
            return super().update(trajectories)
        finally:
            self.value_model.eval()

    def values(self, batch, hidden=None):
        """V(s_t) [B, C]; `hidden`: the policy's completion hidden states when already computed."""
        if not self.value_model.shares_policy_backbone:
            with self.policy.autocast():
                return self.value_model(batch.input_ids, batch.attention_mask, batch.completion_positions)
        if hidden is None:
            hidden = self.policy.completion_hidden(batch.input_ids, batch.attention_mask, batch.completion_positions)
        return self.value_model(hidden)

    def forward(self, batch):
        logprobs, entropy, hidden = sampled_token_outputs(self.policy, batch, self.config.temperature,
                                                          entropy_grad=self.config.entropy_coeff > 0)
        return {"logprobs": logprobs.float(), "entropy": entropy.float(), "values": self.values(batch, hidden)}

    def prepare(self, trajectories):
        with self.timed("values"):
            self.score_in_chunks(trajectories, OLD_VALUES, self.values)
        super().prepare(trajectories)

    def advantages(self, batch):
        c, mask = self.config, batch.loss_mask
        old_values = batch[OLD_VALUES]
        adv, returns = gae(batch.token_rewards, old_values, mask, c.gamma, c.lam)
        ev = explained_variance(old_values, returns, mask)
        if ev == ev:  # nan when the returns are constant
            self.record("explained_variance", ev)
        self.record("value_mean", masked_mean(old_values, mask))
        return {ADVANTAGES: whiten(adv, mask) if c.whiten_advantages else adv, RETURNS: returns * mask}

    def loss(self, batch, logprobs, entropy, values):
        c, mask = self.config, batch.loss_mask
        policy, clipped = clipped_policy_loss(logprobs, batch.old_logprobs, batch.advantages, c.clip_low,
                                              c.clip_high, c.dual_clip)
        value, value_clipped = clipped_value_loss(values, batch[OLD_VALUES], batch[RETURNS], c.value_clip)
        self.record("clip_fraction", masked_mean(clipped.float(), mask))
        self.record("value_clip_fraction", masked_mean(value_clipped.float(), mask))
        terms = {"policy": policy, "value": c.value_coeff * value}
        if c.entropy_coeff > 0:
            terms["entropy"] = -c.entropy_coeff * entropy
        return terms

    def extra_state(self):
        return {"value_model": self.value_model.state_dict()}

    def load_extra_state(self, state):
        if "value_model" in state:
            self.value_model.load_state_dict(state["value_model"])
