"""The verifier refreshed as the policy moves: every `every` iterations, the last `every` iterations' own samples
are labelled and the PRM trains `steps` optimizer steps on them (GRPOConfig.refresh).

A verifier trained once, on the starting policy's samples, drifts off the distribution it judges as the policy
learns. PRIME (Cui et al., 2025, "Process Reinforcement through Implicit Rewards") updates its PRM online on
every batch from outcome labels alone; `every=1, labels="outcome"` is that design for an explicit scalar-head
PRM. Labels are free: the env already graded every episode (`outcome.correct`, its verdict):

- "outcome": each sample rated at its last step by the verdict (an outcome reward model's label);
- "outcome_steps": every step prefix rated by the sample's verdict: the sample's own continuation is one
  Monte-Carlo rollout from each of its prefixes (Math-Shepherd's label with k = 1), so the verifier learns the
  policy's value at every step, which the step credit (algorithms/prm/step_credit.py) differences.

Monte-Carlo step labels with k > 1 rollouts (lmgym.traindata.step_data.policy_labels) cost k more samplings per step
and are left to the offline loop (examples/verifier_loop.py). The sampled token ids are trained on as they are
(never re-tokenised). Samples are scored by the verifier *before* it trains on their labels (the refresh runs
after the iteration's rewards are weighed), so a step's credit never comes from a verifier that saw its outcome.
The PRM's weights are saved in the algorithm's checkpoints; its optimizer moments and a part-filled window are
not (a resumed run starts them afresh).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from lmgym.algorithms.prm.trainer import EncodedRated, PRMConfig, PRMTrainer
from lmgym.buffers import Trajectory
from lmgym.core.checked_config import CheckedConfig, setting
from lmgym.training.callbacks import TrainerCallback

REFRESH_LABELS = ("outcome", "outcome_steps")


@dataclass
class VerifierRefreshConfig(CheckedConfig):
    """When and how the verifier is refreshed on the policy's own samples (see the module docstring)."""

    every: int = setting(0, "refresh every N iterations, on the last N iterations' samples (0: never)")
    steps: int = setting(4, "the verifier's optimizer steps per refresh")
    labels: str = setting("outcome_steps", "outcome (the last step rated by the env's verdict) | outcome_steps "
                                           "(every step prefix rated by the verdict)")
    samples_per_step: int = setting(32, "labelled samples per optimizer step of the verifier")
    learning_rate: float = setting(1e-5, "the verifier's AdamW learning rate")
    micro_batch_size: int = setting(8, "samples per forward pass of the verifier")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require("every", self.every >= 0, "an int >= 0")
        for name in ("steps", "samples_per_step", "micro_batch_size"):
            self.require(name, getattr(self, name) >= 1, "an int >= 1")
        self.require("labels", self.labels in REFRESH_LABELS, f"one of {', '.join(REFRESH_LABELS)}")
        self.require("learning_rate", self.learning_rate > 0, "> 0")


def labelled(t: Trajectory, labels: str) -> EncodedRated | None:
    """A trajectory as a rated item in its own token ids: prompt + completion, rated at its last step ("outcome")
    or at every step ("outcome_steps") by its verdict; None without completion tokens."""
    if not t.completion_ids:
        return None
    ids = list(t.prompt_ids) + list(t.completion_ids)
    positions = [len(t.prompt_ids) + end for end in t.step_ends]
    if labels == "outcome":
        positions = positions[-1:]
    return EncodedRated(ids, positions, [float(t.outcome.correct)] * len(positions))


class VerifierRefresh(TrainerCallback):
    """Collects each iteration's labelled samples and trains `prm` on the window when a refresh is due.

    `observe(trajectories, iteration)` (0-based iteration) returns the refresh's metrics, or {} when none ran.
    As a callback (what GRPO adds with `refresh.every` > 0: algorithms/prm/process_credit.py) it observes each
    iteration's episodes in `on_rewards`, once the PRM has scored them. One PRMTrainer is made at the first
    refresh and kept (its AdamW moments carry over between refreshes)."""

    def __init__(self, prm, config: VerifierRefreshConfig, seed: int = 0, bf16: bool = True,
                 output_dir: str = "runs/run/verifier"):
        if not callable(getattr(prm, "step_logits", None)):
            raise TypeError(f"a verifier refresh trains the PRM's head and backbone: it needs a ProcessRewardModel "
                            f"(step_logits, step_batch), got a {type(prm).__name__}")
        self.prm, self.config = prm, config
        self.trainer_config = PRMConfig(pairs_per_iteration=config.samples_per_step, pointwise_weight=1.0,
                                        learning_rate=config.learning_rate, micro_batch_size=config.micro_batch_size,
                                        seed=seed, bf16=bf16, torch_compile=False, progress=False,
                                        output_dir=output_dir)
        self.trainer: PRMTrainer | None = None
        self.window: dict[int, list[EncodedRated]] = {}
        self.refreshed_at: list[int] = []  # iterations (0-based) after whose sampling the verifier trained

    def on_rewards(self, trainer, trajectories: list[Trajectory]) -> dict[str, float]:
        """This process's episodes of the trainer's current iteration, scored and weighed: `observe` them."""
        return self.observe(trajectories, trainer.iteration)

    def due(self, iteration: int) -> bool:
        """Whether a refresh runs at 0-based `iteration`: after every `every`-th iteration's sampling."""
        return self.config.every > 0 and (iteration + 1) % self.config.every == 0

    def observe(self, trajectories: list[Trajectory], iteration: int) -> dict[str, float]:
        """Label this iteration's samples; when due, train the verifier on the window and empty it."""
        if self.config.every == 0:
            return {}
        items = [x for x in (labelled(t, self.config.labels) for t in trajectories) if x is not None]
        self.window[iteration] = items
        for old in [i for i in self.window if i <= iteration - self.config.every]:
            del self.window[old]
        if not self.due(iteration):
            return {}
        window = [x for i in sorted(self.window) for x in self.window[i]]
        self.window = {}
        if not window:
            return {}
        return self.train(window, iteration)

    def train(self, items: list[EncodedRated], iteration: int) -> dict[str, float]:
        """`steps` optimizer steps of the verifier on `items`; the PRM is left in eval mode."""
        cuda = [self.prm.device.index or 0] if self.prm.device.type == "cuda" else []
        with torch.random.fork_rng(devices=cuda):  # the Trainer seeds torch: leave the RL run's RNG as it was
            if self.trainer is None:
                self.trainer = PRMTrainer(self.prm, items, self.trainer_config)
            else:
                self.trainer.set_items(items)
            losses = []
            for _ in range(self.config.steps):
                losses.append(self.trainer.train_iteration()["loss"])
                self.trainer.iteration += 1
        self.refreshed_at.append(iteration)
        positive = sum(sum(x.labels) for x in items) / max(sum(len(x.labels) for x in items), 1)
        return {"verifier_loss": sum(losses) / len(losses), "verifier_samples": float(len(items)),
                "verifier_positive_fraction": positive}
