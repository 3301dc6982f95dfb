"""Configuration dataclasses. Every field is documented; invariants are checked in __post_init__."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KL_ESTIMATORS = ("k1", "k2", "k3")
LOSS_AGGREGATIONS = ("token_mean", "sequence_mean", "constant")


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the field."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


@dataclass
class RLConfig:
    """Settings shared by every algorithm (the loop, sampling, optimisation, KL, logging)."""

    # loop
    num_iterations: int = 100          # collect -> update rounds
    prompts_per_iteration: int = 16    # distinct env episodes (prompts) per iteration
    samples_per_prompt: int = 8        # completions per prompt (the GRPO group size)
    seed: int = 0
    # sampling
    max_new_tokens: int = 64           # per action (per step in stepwise envs)
    temperature: float = 1.0
    top_p: float = 1.0
    max_episode_steps: int = 10        # stepwise envs: actions per episode before truncation
    # optimisation
    learning_rate: float = 1e-5
    weight_decay: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.99)
    warmup_iterations: int = 0         # linear warmup of the learning rate, in optimizer steps
    max_grad_norm: float = 1.0         # gradient clipping (0 disables)
    update_epochs: int = 1             # passes over each collected batch
    minibatch_size: int = 0            # trajectories per optimizer step (0: the whole batch, one step)
    micro_batch_size: int = 32         # trajectories per forward/backward (gradient accumulation inside a step)
    loss_aggregation: str = "token_mean"  # token_mean (over the optimizer step) | sequence_mean | constant
    max_completion_length: int = 0     # normaliser for "constant" aggregation (0: max_new_tokens)
    bf16: bool = True                  # bf16 autocast on CUDA (ignored on CPU)
    # KL to the reference model
    kl_coeff: float = 0.0              # beta; 0 turns the reference model off
    kl_estimator: str = "k3"           # k1 | k2 | k3 (Schulman's estimators)
    kl_in_reward: bool = False         # True: subtract beta * k1 from token rewards; False: add beta * KL to the loss
    ref_sync_every: int = 0            # copy policy -> reference every N iterations (0: never)
    # evaluation, logging, checkpoints
    eval_every: int = 0                # iterations between evaluations (0: only at the end)
    eval_at_start: bool = True
    eval_episodes: int = 256
    eval_max_new_tokens: int = 0       # 0: max_new_tokens
    save_every: int = 0                # iterations between checkpoints (0: only at the end)
    keep_checkpoints: int = 2          # complete checkpoints kept in <output_dir> (the newest ones)
    max_nonfinite_steps: int = 3       # stop the run after this many optimizer steps in a row skipped for NaN/inf
    output_dir: str = "runs/run"
    wandb: str = "off"                 # off | offline | online
    wandb_project: str = "rlgym"
    progress: bool = True              # tqdm progress bar

    def __post_init__(self) -> None:
        for name in ("num_iterations", "prompts_per_iteration", "samples_per_prompt", "max_new_tokens",
                     "max_episode_steps", "update_epochs", "micro_batch_size", "eval_episodes",
                     "keep_checkpoints", "max_nonfinite_steps"):
            _check(isinstance(getattr(self, name), int) and getattr(self, name) > 0,
                   f"{type(self).__name__}.{name} must be a positive integer, got {getattr(self, name)!r}")
        for name in ("minibatch_size", "warmup_iterations", "eval_every", "save_every", "ref_sync_every",
                     "max_completion_length", "eval_max_new_tokens"):
            _check(isinstance(getattr(self, name), int) and getattr(self, name) >= 0,
                   f"{type(self).__name__}.{name} must be an integer >= 0, got {getattr(self, name)!r}")
        _check(self.learning_rate > 0, f"learning_rate must be > 0, got {self.learning_rate}")
        _check(self.temperature >= 0, f"temperature must be >= 0, got {self.temperature}")
        _check(0 < self.top_p <= 1, f"top_p must be in (0, 1], got {self.top_p}")
        _check(self.kl_coeff >= 0, f"kl_coeff must be >= 0, got {self.kl_coeff}")
        _check(self.max_grad_norm >= 0, f"max_grad_norm must be >= 0, got {self.max_grad_norm}")
        _check(self.kl_estimator in KL_ESTIMATORS,
               f"kl_estimator must be one of {', '.join(KL_ESTIMATORS)}, got {self.kl_estimator!r}")
        _check(self.loss_aggregation in LOSS_AGGREGATIONS,
               f"loss_aggregation must be one of {', '.join(LOSS_AGGREGATIONS)}, got {self.loss_aggregation!r}")
        _check(self.wandb in ("off", "offline", "online"), f"wandb must be off, offline or online, got {self.wandb!r}")
        self.adam_betas = tuple(self.adam_betas)

    @property
    def batch_size(self) -> int:
        """Trajectories collected per iteration."""
        return self.prompts_per_iteration * self.samples_per_prompt

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def load_config(cls: type, path: str | None = None, overrides: dict[str, Any] | None = None):
    """Build `cls` from a YAML file (optional) plus overrides; unknown keys are a ConfigError."""
    values: dict[str, Any] = {}
    if path:
        import yaml

        file = Path(path)
        if not file.is_file():
            raise ConfigError(f"config file not found: {path}")
        loaded = yaml.safe_load(file.read_text()) or {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}: expected a mapping of field: value")
        values.update(loaded)
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"unknown {cls.__name__} field(s): {', '.join(unknown)}")
    return cls(**values)
