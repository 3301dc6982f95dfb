"""`RLConfig`: the settings every RL algorithm shares (collection, sampling, the update, KL, rewards), on top
of training's `TrainerConfig`. Each algorithm's own config (GRPOConfig, PPOConfig, ...) subclasses it."""
from __future__ import annotations

import math
from dataclasses import dataclass

from lmgym.algorithms.reward_combination import COMBINATIONS
from lmgym.training.config import ConfigError, TrainerConfig, setting

KL_ESTIMATORS = ("k1", "k2", "k3")
LOSS_AGGREGATIONS = ("token_mean", "sequence_mean", "constant")


@dataclass
class RLConfig(TrainerConfig):
    """Settings shared by every RL algorithm (sampling, groups, the update, KL), on top of `TrainerConfig`.

    `max_completion_length` is not a field: TRL uses it for the generation cap, so it is refused with a
    line naming ours. An episode's step limit is the env's own (`max_steps`, a `TimeLimit` wrapper).
    """

    # collection
    prompts_per_iteration: int = setting(16, "distinct env episodes (prompts) per iteration, over all processes "
                                             "(torchrun splits them; must divide)")
    samples_per_prompt: int = setting(8, "completions per prompt (the GRPO group size; TRL's num_generations)")
    # sampling
    max_new_tokens: int = setting(64, "generation cap per action (per step in stepwise envs)")
    max_prompt_length: int = setting(0, "prompt tokens kept at most, the last ones (TRL's left truncation; 0: all)")
    temperature: float = setting(1.0, "sampling temperature (0: greedy)")
    top_p: float = setting(1.0, "nucleus sampling mass, in (0, 1] (1: off)")
    # the update
    loss_aggregation: str = setting("token_mean", "token_mean (over the optimizer step) | sequence_mean | constant")
    loss_length_normalizer: int = setting(0, "divisor of each sequence's token sum in 'constant' aggregation "
                                             "(0: the completion budget)")
    update_epochs: int = setting(1, "passes over each collected batch (TRL's num_iterations, mu)")
    minibatch_size: int = setting(0, "trajectories per optimizer step, over all processes "
                                     "(0: the whole batch, one step)")
    max_tokens_per_microbatch: int = setting(0, "padded tokens (rows x longest row) per forward pass, trajectories "
                                                "grouped by length (0: use micro_batch_size)")
    mask_truncated_completions: bool = setting(False, "train on no token of an episode cut off (at max_new_tokens "
                                                      "or the env's step limit); it still counts in its group")
    replay_iterations: int = setting(0, "also train on the previous N iterations' episodes, importance-weighted "
                                        "(0: on-policy)")
    rollout_workers: int = setting(0, "torchrun ranks that only sample, streaming to the others, which only train "
                                      "(0: all do both)")
    max_policy_lag: int = setting(1, "with rollout_workers: versions the samplers run behind (importance-weighted; "
                                     "older: dropped)")
    log_completions: bool = setting(False, "each iteration's prompts, completions, rewards to "
                                           "<output_dir>/completions.jsonl and the report_to trackers")
    # evaluation
    eval_episodes: int = setting(256, "held-out episodes per evaluation (greedy)")
    eval_max_new_tokens: int = setting(0, "generation cap per action in evaluation (0: max_new_tokens)")
    # KL to the reference model
    kl_coeff: float = setting(0.0, "beta, the weight of the KL to the reference (0: no reference model)")
    kl_estimator: str = setting("k3", "k1 | k2 | k3 (Schulman's estimators), for the KL in the loss and the "
                                      "logged kl")
    kl_in_reward: bool = setting(False, "subtract beta * k1 from the token rewards instead of adding beta * KL "
                                        "to the loss")
    ref_sync_every: int = setting(0, "copy policy -> reference every N iterations (0: never)")
    # rewards
    reward_weights: tuple[float, ...] = setting((), "one weight per reward function, in order, for the env a "
                                                    "trainer builds from a dataset (TRL's; empty: each 1)")
    reward_combination: str = setting("env", "env (the env's own reward) | uniform | std | pca | l2: the reward "
                                             "components combined over each batch")
    outcome_weight: float = setting(1.0, "weight of the env's own reward, >= 0 (0 trains on the PRM alone)")
    prm_weight: float = setting(0.0, "weight of the PRM's per-step score as a dense reward beside the env's, >= 0 "
                                     "(needs prm=; 0: off)")
    prm_credit: str = setting("score", "what a step earns from the PRM: score (its score) | progress (its score minus "
                                       "the one before)")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("prompts_per_iteration", "samples_per_prompt", "max_new_tokens", "update_epochs",
                     "eval_episodes"):
            self.require(name, getattr(self, name) > 0, "a positive integer")
        for name in ("minibatch_size", "ref_sync_every", "loss_length_normalizer", "eval_max_new_tokens",
                     "replay_iterations", "max_tokens_per_microbatch", "max_prompt_length", "rollout_workers",
                     "max_policy_lag"):
            self.require(name, getattr(self, name) >= 0, "an integer >= 0")
        self.require("temperature", self.temperature >= 0, ">= 0")
        self.require("top_p", 0 < self.top_p <= 1, "in (0, 1]")
        self.require("kl_coeff", self.kl_coeff >= 0, ">= 0")
        self.require("kl_estimator", self.kl_estimator in KL_ESTIMATORS, f"one of {', '.join(KL_ESTIMATORS)}")
        self.require("loss_aggregation", self.loss_aggregation in LOSS_AGGREGATIONS,
                     f"one of {', '.join(LOSS_AGGREGATIONS)}")
        combinations = ("env", *COMBINATIONS)
        self.require("reward_combination", self.reward_combination in combinations, f"one of {', '.join(combinations)}")
        self.require("reward_weights", all(math.isfinite(w) for w in self.reward_weights), "finite numbers")
        self.require("outcome_weight", self.outcome_weight >= 0, ">= 0")
        self.require("prm_weight", self.prm_weight >= 0, ">= 0")
        self.require("prm_credit", self.prm_credit in ("score", "progress"), "one of score, progress")
        self.require("outcome_weight", self.outcome_weight > 0 or self.prm_weight > 0,
                     "> 0 when prm_weight is 0 (else every reward is 0)")

    @property
    def batch_size(self) -> int:
        """Trajectories collected per iteration."""
        return self.prompts_per_iteration * self.samples_per_prompt

    def check_shards(self, world: int) -> None:
        """The global batch must split into whole groups (and whole minibatches) over `world` processes."""
        for name in ("prompts_per_iteration", "minibatch_size"):
            if getattr(self, name) % world:
                raise ConfigError(f"{type(self).__name__}.{name} must be divisible by the number of processes "
                                  f"({world}): it is the global batch, split evenly over ranks; got "
                                  f"{getattr(self, name)}", name)
        if self.replay_iterations and world > 1:  # each rank replays its own buffer; a checkpoint keeps rank 0's
            raise ConfigError(f"{type(self).__name__}.replay_iterations needs a single process for now: checkpoints "
                              f"save rank 0's replay buffer only, so a resumed run could not replay exactly; got "
                              f"{self.replay_iterations} with {world} processes", "replay_iterations")

    def optimizer_steps_per_iteration(self) -> int:
        """Optimizer steps one iteration makes when every collected trajectory is trained on."""
        size = self.minibatch_size if 0 < self.minibatch_size < self.batch_size else self.batch_size
        return self.update_epochs * math.ceil(self.batch_size / size)
