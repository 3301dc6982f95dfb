"""`ProcessCredit`: the PRM's share of GRPO (and of the variants that inherit it): step-level advantages and the
verifier refreshed as the policy moves.

With a PRM (`prm_weight` > 0) the advantages are DeepSeekMath's process supervision (`process_advantages`): each
step's PRM reward normalised over its group's steps and summed from the token's step to the end, plus the
group-normalised rest of the reward (the env's, times `outcome_weight`, and any shaping paid at the end). With
`prm_credit="progress"` each step earns its PRM score difference and its tokens get the step's own normalised
credit beside the outcome advantage (algorithms/prm/step_credit.py). Without PRM scores on the batch, the class's
own `outcome_advantages`. `refresh` (GRPOConfig) retrains the PRM on the policy's own samples as it moves: the
`VerifierRefresh` callback (algorithms/prm/refresh.py), added first to `callbacks`, its weights in checkpoints.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from lmgym.algorithms.advantages import process_advantages
from lmgym.algorithms.prm.refresh import VerifierRefresh
from lmgym.algorithms.prm.reward import PRM_REWARDS, STEP_ENDS
from lmgym.algorithms.prm.step_credit import progress_advantages
from lmgym.buffers import Batch
from lmgym.training import distributed as dist
from lmgym.training.callbacks import TrainerCallback
from lmgym.training.config import ConfigError


class ProcessCredit:
    """Mixin before an `RLAlgorithm` whose config has `prm_credit`, `prm_weight`, `scale_by_std` and `refresh`
    (GRPOConfig): `class GRPO(ProcessCredit, RLAlgorithm)`. The class writes `outcome_advantages(batch)`."""

    token_fields = (PRM_REWARDS, STEP_ENDS)  # collated only when the PRM scored every trajectory

    def __init__(self, policy, env=None, config=None, ref_policy=None, buffer=None, eval_env=None, prm=None,
                 callbacks: Sequence[TrainerCallback] | None = None, **data: Any):
        """RLAlgorithm's arguments; `data`: its train_dataset, eval_dataset and reward_funcs."""
        super().__init__(policy, env, config, ref_policy, buffer, eval_env, prm, callbacks, **data)
        c, self.verifier_refresh = self.config, None
        if c.refresh.every > 0:
            if self.prm is None:
                raise ConfigError.of_field(type(c).__name__, "refresh.every", f"is {c.refresh.every}, but no PRM "
                                           f"was given to refresh: pass prm= or set refresh.every to 0")
            if dist.world_size() > 1:
                raise ConfigError.of_field(type(c).__name__, "refresh.every", "needs a single process for now (each "
                                           "rank would train its own copy of the verifier)")
            self.verifier_refresh = VerifierRefresh(self.prm, c.refresh, c.seed, c.bf16, f"{c.output_dir}/verifier")
            self.callbacks.add(self.verifier_refresh, index=0)

    def outcome_advantages(self, batch: Batch) -> torch.Tensor:
        """Per-token advantages [B, C] from the rewards alone (no PRM scores on the batch)."""
        raise NotImplementedError(f"{type(self).__name__} uses ProcessCredit: write outcome_advantages(batch)")

    def advantages(self, batch: Batch) -> torch.Tensor:
        """Process advantages when the PRM scored the batch (`prm_credit`), else `outcome_advantages`."""
        if PRM_REWARDS.name not in batch.fields:
            return self.outcome_advantages(batch)
        c, prm = self.config, batch[PRM_REWARDS]
        outcome = batch.rewards - prm.sum(1)
        if c.prm_credit == "progress":
            adv = progress_advantages(prm, batch[STEP_ENDS], batch.group_ids, outcome, c.prm_weight, c.scale_by_std)
        else:
            adv = process_advantages(prm, batch[STEP_ENDS], batch.group_ids, outcome, c.scale_by_std)
        return adv * batch.loss_mask

    def extra_state(self) -> dict:
        """The refreshed verifier's weights (nothing when it is not refreshed)."""
        return {"verifier": self.prm.state_dict()} if self.verifier_refresh is not None else {}

    def load_extra_state(self, state: dict) -> None:
        if self.verifier_refresh is not None and "verifier" in state:
            self.prm.load_state_dict(state["verifier"])
