"""Direct Preference Optimization (Rafailov et al., 2023) on `Trainer`, with IPO and length-normalised DPO.

Each pair's implicit reward margin is h = (log pi(chosen) - log pi(rejected)) - (the same under the
reference). DPO minimises -log sigmoid(beta h) (with label smoothing e: -(1-e) log sigmoid(beta h) -
e log sigmoid(-beta h), conservative DPO); IPO (Azar et al., 2023) minimises (h - 1/(2 beta))^2 on
per-token mean log-probs, as TRL does; LengthNormalizedDPO (as in Tulu 3) is DPO on per-token mean
log-probs. The variants are subclasses that set two class attributes, `loss_kind` and `length_normalized`.

The reference is `policy.frozen_copy()` unless given (under LoRA: the policy with its adapter disabled,
algorithms/reference.py); it never changes, so its log-probs of every pair are computed once, when the
trainer is built. Each iteration is one optimizer step over `pairs_per_iteration` pairs drawn in seeded
epochs (epoch e's order is a permutation seeded by (seed, e)), so a resumed run draws what an
uninterrupted one would.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from lmgym.algorithms import reference as ref
from lmgym.algorithms.preference_encoding import EncodedPair, completion_logprobs, encode_pairs
from lmgym.policies.base import TrainablePolicy
from lmgym.training import distributed as dist
from lmgym.training.config import TrainerConfig, setting
from lmgym.training.token_batches import EpochDraws
from lmgym.training.trainer import Trainer

LOSS_KINDS = ("sigmoid", "ipo")


def dpo_loss(policy_chosen: torch.Tensor, policy_rejected: torch.Tensor, ref_chosen: torch.Tensor,
             ref_rejected: torch.Tensor, beta: float, kind: str = "sigmoid", label_smoothing: float = 0.0,
             chosen_lengths: torch.Tensor | None = None, rejected_lengths: torch.Tensor | None = None
             ) -> torch.Tensor:
    """Per-pair losses [P] from summed completion log-probs [P] under the policy and the reference.

    kind: "sigmoid" (DPO, with `label_smoothing` e in [0, 0.5)) or "ipo" (no smoothing). With lengths
    (token counts [P]), every log-prob is first divided by its completion's length (per-token means).
    """
    if kind not in LOSS_KINDS:
        raise ValueError(f"dpo_loss: kind must be one of {', '.join(LOSS_KINDS)}, got {kind!r}")
    if not beta > 0:
        raise ValueError(f"dpo_loss: beta must be > 0, got {beta!r}")
    if not 0 <= label_smoothing < 0.5 or (kind == "ipo" and label_smoothing):
        raise ValueError(f"dpo_loss: label_smoothing must be in [0, 0.5) (0 for ipo), got {label_smoothing!r}")
    if (chosen_lengths is None) != (rejected_lengths is None):
        raise ValueError("dpo_loss: give both chosen_lengths and rejected_lengths, or neither")
    chosen = policy_chosen.float() - ref_chosen.float()
    rejected = policy_rejected.float() - ref_rejected.float()
    if chosen_lengths is not None:
        chosen, rejected = chosen / chosen_lengths, rejected / rejected_lengths
    h = chosen - rejected
    if kind == "ipo":
        return (h - 1 / (2 * beta)) ** 2
    return -(1 - label_smoothing) * F.logsigmoid(beta * h) - label_smoothing * F.logsigmoid(-beta * h)


@dataclass
class DPOConfig(TrainerConfig):
    """Settings of `DPO` (and IPO, LengthNormalizedDPO), on top of `TrainerConfig` (micro_batch_size counts
    pairs: each is two sequences)."""

    beta: float = setting(0.1, "DPO's beta, the strength of the pull to the reference (IPO: its tau), > 0")
    label_smoothing: float = setting(0.0, "conservative DPO: the chance a label is flipped, in [0, 0.5) (IPO: 0)")
    pairs_per_iteration: int = setting(32, "preference pairs per iteration: one optimizer step over them, drawn "
                                           "in seeded epochs")
    max_length: int = setting(1024, "tokens of prompt + completion; longer completions are cut at the end")
    score_batch_size: int = setting(16, "pairs per forward pass when scoring the reference and evaluating")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require("beta", self.beta > 0, "> 0")
        self.require("label_smoothing", 0 <= self.label_smoothing < 0.5, "in [0, 0.5)")
        for name in ("pairs_per_iteration", "max_length", "score_batch_size"):
            self.require(name, getattr(self, name) > 0, "a positive integer")

    def optimizer_steps_per_iteration(self) -> int:
        return 1


class DPO(Trainer):
    """DPO on fixed preference pairs.

    Args:
        policy: the policy trained (an HFPolicy; LoRA or full weights).
        pairs: PreferencePairs to train on (traindata/preference_data.py).
        config: DPOConfig.
        ref_policy: the reference (None: `policy.frozen_copy()`, the policy as it is now).
        held_out: pairs `evaluate` scores: loss, rewards, reward_margin and reward_accuracy.

    Metrics (TRL's rewards/chosen ... as reward_chosen ...: `rewards_<name>` is a reward component in the run
    folder's plots): dpo (the loss term), reward_chosen, reward_rejected (beta x log-ratio to the reference),
    reward_margin, reward_accuracy, logps_chosen, logps_rejected (the policy's, as the loss sees them).
    """

    config_class = DPOConfig
    policy_contract = TrainablePolicy
    loss_kind = "sigmoid"      # dpo_loss's kind
    length_normalized = False  # per-token mean log-probs instead of sums
    plot_panels = (("loss", ["loss", "eval_loss"], "loss"),
                   ("implicit reward", ["reward_chosen", "reward_rejected", "reward_margin", "eval_reward_margin"],
                    "beta x log-ratio"),
                   ("reward accuracy", ["reward_accuracy", "eval_reward_accuracy"], "accuracy"))
    progress_metrics = {"loss": ("loss", ".4f"), "margin": ("reward_margin", ".3f")}

    def __init__(self, policy, pairs: Sequence, config: DPOConfig | None = None, ref_policy=None,
                 held_out: Sequence = (), callbacks: Sequence | None = None):
        self.given_reference = ref_policy is not None
        self.ref_policy = self.checked_reference(ref_policy)  # none given: a frozen copy (`before_data_parallel`)
        super().__init__(policy, config, callbacks)
        c = self.config
        if self.loss_kind == "ipo":
            c.require("label_smoothing", c.label_smoothing == 0, f"0 for {type(self).__name__}")
        self.pairs = encode_pairs(policy, list(pairs), c.max_length, f"{type(self).__name__}: pairs")
        if not self.pairs:
            raise ValueError(f"{type(self).__name__}: no preference pairs to train on")
        self.held_out = encode_pairs(policy, list(held_out), c.max_length, f"{type(self).__name__}: held_out")
        self.ref_logps = self.reference_logprobs(self.pairs)  # [N, 2]: (chosen, rejected) summed log-probs
        self.held_out_ref_logps = self.reference_logprobs(self.held_out)
        self.draws = EpochDraws(len(self.pairs), c.seed)

    def before_data_parallel(self) -> None:
        """The reference, when none was given: a frozen copy of the policy, made before DDP or FSDP wraps it."""
        if self.ref_policy is None:
            self.ref_policy = self.policy.frozen_copy()

    # ------------------------------------------------------------------ scoring
    def pair_logprobs(self, scorer, pairs: Sequence[EncodedPair]) -> tuple[torch.Tensor, torch.Tensor]:
        """(summed log-probs [P, 2], token counts [P, 2]) of each pair's (chosen, rejected) under `scorer`,
        in one forward pass (gradients flow when enabled)."""
        rows = [(p.prompt, p.chosen) for p in pairs] + [(p.prompt, p.rejected) for p in pairs]
        sums, counts = completion_logprobs(scorer, rows)
        n = len(pairs)
        return torch.stack([sums[:n], sums[n:]], 1), torch.stack([counts[:n], counts[n:]], 1)

    def reference_logprobs(self, pairs: Sequence[EncodedPair]) -> torch.Tensor:
        """Summed log-probs [P, 2] of each pair's (chosen, rejected) under the reference (no gradients)."""
        out = torch.zeros((len(pairs), 2))
        batch = self.config.score_batch_size
        with self._phase("reference", -(-len(pairs) // batch), "batch") as bar, \
                ref.reference_context(self.ref_policy), torch.no_grad():
            for start in range(0, len(pairs), batch):
                out[start:start + batch] = self.pair_logprobs(self.ref_policy, pairs[start:start + batch])[0].cpu()
                bar.update(1)
        return out

    def pair_terms(self, logps: torch.Tensor, counts: torch.Tensor, ref_logps: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
        """(per-pair losses [P], implicit rewards [P, 2]: beta x (policy - reference) log-probs, per-token
        means when length_normalized)."""
        ref_logps = ref_logps.to(logps.device)
        lengths = (counts[:, 0], counts[:, 1]) if self.length_normalized else (None, None)
        losses = dpo_loss(logps[:, 0], logps[:, 1], ref_logps[:, 0], ref_logps[:, 1], self.config.beta,
                          self.loss_kind, self.config.label_smoothing, *lengths)
        ratio = logps.detach().float() - ref_logps
        rewards = self.config.beta * (ratio / counts if self.length_normalized else ratio)
        return losses, rewards

    # ------------------------------------------------------------------ drawing and training
    def draw(self) -> list[int]:
        """Indices of this iteration's pairs: the next `pairs_per_iteration` of the seeded epochs."""
        return self.draws.indices(self.iteration, self.config.pairs_per_iteration)

    def train_iteration(self) -> dict[str, Any]:
        drawn = self.draw()
        total = len(drawn)
        shard = drawn[dist.rank()::dist.world_size()]  # the draw is shared; each process takes its slice
        sums = dict.fromkeys(("reward_chosen", "reward_rejected", "reward_margin", "reward_accuracy",
                              "logps_chosen", "logps_rejected"), 0.0)

        def micro_loss(chunk: list[int]) -> dict[str, torch.Tensor]:
            logps, counts = self.pair_logprobs(self.policy, [self.pairs[i] for i in chunk])
            losses, rewards = self.pair_terms(logps, counts, self.ref_logps[chunk])
            for name, value in pair_stats(rewards, logps.detach() / counts if self.length_normalized
                                          else logps.detach()).items():
                sums[name] += value
            return {"dpo": losses.sum() / total}

        self.policy.model.train()
        try:
            with self.timed("update"), self._phase("update", -(-len(shard) // self.config.micro_batch_size), "mb"):
                stats = self.optimizer_step(shard, micro_loss)
        finally:
            self.policy.model.eval()
        stats.update({name: value / total for name, value in dist.all_reduce_dict(sums).items()})
        stats["pairs"] = total
        return stats

    # ------------------------------------------------------------------ evaluation
    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """On the held-out pairs: loss, reward_chosen, reward_rejected, reward_margin (their mean
        difference) and reward_accuracy (chosen reward above rejected; a tie counts half). Nothing without
        held-out pairs."""
        if not self.held_out:
            return {}
        batch, n = self.config.score_batch_size, len(self.held_out)
        totals = {"loss": 0.0}
        for start in range(0, n, batch):
            logps, counts = self.pair_logprobs(self.policy, self.held_out[start:start + batch])
            losses, rewards = self.pair_terms(logps, counts, self.held_out_ref_logps[start:start + batch])
            totals["loss"] += float(losses.sum())
            for name, value in pair_stats(rewards, logps / counts if self.length_normalized else logps).items():
                totals[name] = totals.get(name, 0.0) + value
        return {name: value / n for name, value in totals.items()}

    # ------------------------------------------------------------------ checkpoints and description
    def state_dict(self) -> dict[str, Any]:
        """The Trainer's state and the reference's entries (never synced: rebuilt as at the start)."""
        return {**super().state_dict(), **ref.reference_state(self.ref_policy, None, self.iteration)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        ref.load_reference(self.ref_policy, state, None)

    def describe(self) -> dict[str, Any]:
        out = {**super().describe(), "loss_kind": self.loss_kind, "length_normalized": self.length_normalized,
               "train_pairs": len(self.pairs), "held_out_pairs": len(self.held_out),
               "truncated_pairs": sum(p.truncated for p in self.pairs)}
        if self.given_reference:
            out["reference_model"] = getattr(self.ref_policy, "name_or_path", None)
        return out


def pair_stats(rewards: torch.Tensor, logps: torch.Tensor) -> dict[str, float]:
    """Sums over pairs of the implicit rewards [P, 2], their margin, wins (a tie counts half) and the
    policy's log-probs [P, 2] (as the loss saw them)."""
    chosen, rejected = rewards[:, 0], rewards[:, 1]
    return {"reward_chosen": float(chosen.sum()), "reward_rejected": float(rejected.sum()),
            "reward_margin": float((chosen - rejected).sum()),
            "reward_accuracy": float((chosen > rejected).float().sum() + 0.5 * (chosen == rejected).float().sum()),
            "logps_chosen": float(logps[:, 0].sum()), "logps_rejected": float(logps[:, 1].sum())}


class IPO(DPO):
    """Identity Preference Optimisation: (h - 1/(2 beta))^2 on per-token mean log-probs (no label smoothing)."""

    loss_kind = "ipo"
    length_normalized = True


class LengthNormalizedDPO(DPO):
    """DPO on per-token mean log-probs: the implicit reward is beta / |y| x log(pi(y) / pi_ref(y))."""

    length_normalized = True


VARIANTS = {"sigmoid": DPO, "ipo": IPO, "length_normalized": LengthNormalizedDPO}  # a loss name -> its trainer
