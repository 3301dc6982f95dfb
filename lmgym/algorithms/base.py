"""`RLAlgorithm(Trainer)`: collection, reference scoring, KL, advantages and the loss of every RL algorithm.

One iteration: collect episodes -> combine their reward components (`reward_combination`) -> weigh the
env's reward and a PRM's step scores (`outcome_weight`, `prm_weight`: algorithms/prm/reward.py) -> select ->
reference log-probs (and KL in the reward, if asked) -> advantages -> update (epochs x minibatches, each
one `Trainer.optimizer_step` over micro-batches); after it the reference is re-synced every
`ref_sync_every` iterations (the `ReferenceSync` callback, algorithms/reference.py). The loop, evaluation
schedule, run folder, checkpoints and callbacks are the Trainer's."""
from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Sequence

import numpy as np
import torch

from lmgym.algorithms import reference as ref
from lmgym.algorithms import replay
from lmgym.algorithms.advantages import zero_variance_fraction
from lmgym.algorithms.async_rollouts import AsyncRollouts
from lmgym.algorithms.config import RLConfig
from lmgym.algorithms.env_input import trainer_envs
from lmgym.algorithms.kl import kl_estimate, pay_kl_in_reward
from lmgym.algorithms.losses import completion_budget, token_weights
from lmgym.algorithms.prm.reward import check_prm, prm_description, weigh_rewards
from lmgym.algorithms.reward_combination import combine_batch_rewards
from lmgym.buffers import ADVANTAGES, REF_LOGPROBS, Batch, ReplayBuffer, TokenField, Trajectory, collate
from lmgym.envs.registry import env_id, env_kwargs
from lmgym.episodes.env_state import check_not_vector
from lmgym.episodes.rollout import SamplingSettings, rollout
from lmgym.evaluation.episode_metrics import ToolErrorCounter, episode_metrics
from lmgym.evaluation.evaluate import evaluate as evaluate_episodes
from lmgym.policies.base import TrainablePolicy
from lmgym.policies.decoding.generation import row_key
from lmgym.policies.logprobs import sampled_token_outputs
from lmgym.policies.prompting import pad_id
from lmgym.training import distributed as dist
from lmgym.training.callbacks import TrainerCallback
from lmgym.training.checkpoints.trainer_state import CheckpointFile
from lmgym.training.completions_log import append_completions
from lmgym.training.guards import warn
from lmgym.training.plots import PANELS
from lmgym.training.progress import counting_tokens
from lmgym.training.rollout_workers import split_ranks
from lmgym.training.token_batches import same_count_on_every_rank, token_micro_batches
from lmgym.training.trainer import Trainer


def by_length(trajectories: list[Trajectory]) -> list[Trajectory]:
    """Trajectories sorted by total length, so micro-batches pad little (the loss does not depend on order)."""
    return sorted(trajectories, key=lambda t: len(t.prompt_ids) + len(t.completion_ids))


def padded_length(t: Trajectory) -> int:
    """The row a trajectory takes in a collated batch (`lmgym.buffers.collate` pads every row to the longest)."""
    return len(t.prompt_ids) + max(len(t.completion_ids), 1)


def truncation_mask(trajectories: list[Trajectory], mask_truncated: bool) -> dict[int, int]:
    """1 for each trajectory trained on, 0 for one cut off (`truncated`) when `mask_truncated` (TRL's
    mask_truncated_completions), keyed by the trajectory's id()."""
    return {id(t): 0 if mask_truncated and t.truncated else 1 for t in trajectories}


class RLAlgorithm(Trainer):
    """Base class of every RL algorithm.

    Subclasses implement `advantages(batch)` (per-token advantages for a whole iteration's batch) and
    `loss(batch, logprobs, entropy)` (named per-token loss terms). Everything else is shared.
    Optional hooks: `forward` (model outputs the loss needs; PPO adds values), `select_for_update`, and
    the Trainer's (`param_groups`, `extra_state`/`load_extra_state`, ...). `prm`: a process reward model
    (`score_trajectories`), whose step scores join the reward when `prm_weight` > 0. `callbacks`: as the
    Trainer's, with `on_rewards` called too; `ReferenceSync` is added first when `ref_sync_every` > 0.
    `env` (or TRL's `train_dataset`, and `eval_dataset` for `eval_env`) may be a `datasets.Dataset` or a list of
    dicts with a "prompt" column, scored by `reward_funcs` (TRL's): it is wrapped in Dataset-v0
    (algorithms/env_input.py).
    """

    config_class = RLConfig
    policy_contract = TrainablePolicy
    token_fields: tuple[TokenField, ...] = ()  # declared per-token fields collated into batch (PPO: old values)
    kl_reward_per_token = False         # KL-in-reward: per token (True) or summed at the last step (False)
    plot_panels = PANELS
    progress_metrics = {"reward": ("reward_mean", ".3f"), "acc": ("train_accuracy", ".2f")}

    def __init__(self, policy, env=None, config: RLConfig | None = None, ref_policy=None,
                 buffer: ReplayBuffer | None = None, eval_env=None, prm=None,
                 callbacks: Sequence[TrainerCallback] | None = None, *, train_dataset=None, eval_dataset=None,
                 reward_funcs=None):
        config = self.checked_config(config)
        env, eval_env = trainer_envs(type(self).__name__, env, eval_env, train_dataset, eval_dataset, reward_funcs,
                                     config.reward_weights)  # a data set: Dataset-v0 (algorithms/env_input.py)
        for given in (env, eval_env):
            check_not_vector(given, type(self).__name__)  # one line naming what to pass, before any set-up
        self.env, self.eval_env = env, eval_env
        # with kl_coeff > 0 and none given: a frozen copy (`before_data_parallel`)
        self.ref_policy = self.checked_reference(ref_policy)
        dist.init_from_env()
        roles = split_ranks(config.rollout_workers)  # rollout_workers: R ranks sample, the rest train
        self.rollouts: AsyncRollouts | None = None
        self.rollout_rank = roles is not None and roles.is_rollout
        super().__init__(policy, config, callbacks)
        self.config.check_shards(dist.world_size())
        c = self.config
        self.prm = check_prm(prm, c, getattr(policy, "tokenizer", None))
        self.buffer = (buffer if buffer is not None
                       else ReplayBuffer(max(c.batch_size * (c.replay_iterations + 4), 1024)))
        replay.check_capacity(self.buffer, c.batch_size, c.replay_iterations)
        self.ref_synced_at: int | None = None  # iteration of the last policy -> reference copy (None: never)
        if c.ref_sync_every > 0:
            self.callbacks.add(ref.ReferenceSync(), index=0)
        self.tool_errors = ToolErrorCounter()  # failed tool calls: counted per iteration/evaluation, warned once
        self._warned_long_trajectory = False  # a trajectory over max_tokens_per_microbatch was warned about
        if roles is not None:
            self.rollouts = AsyncRollouts(self, roles)
            if not self.rollout_rank:
                self.callbacks.add(self.rollouts)

    def before_data_parallel(self) -> None:
        """The KL reference, when one is needed and none was given: a frozen copy of the policy, made before
        DDP wraps it or FSDP shards it."""
        c = self.config
        if self.rollout_rank:  # it samples only: no reference
            return
        if c.kl_coeff > 0 and self.ref_policy is None:
            self.ref_policy = self.policy.frozen_copy()
        ref.prepare_sharded_resync(self.ref_policy, c.data_parallel, c.ref_sync_every)

    def compile_models(self) -> None:
        """The policy's layers and, when it has its own model, the KL reference's."""
        super().compile_models()
        if (self.wants_frozen_compile() and ref.has_own_weights(self.ref_policy)
                and hasattr(self.ref_policy, "compile_layers")):
            self.ref_policy.compile_layers(self.config.torch_compile_backend)

    def train(self, resume: bool = False, resume_from_checkpoint=None) -> list[dict]:
        """The Trainer's loop; on a rollout rank (`rollout_workers`), the rollout loop instead (its checkpoint is the
        trainers': they send where to start from). Returns the run's metrics rows on every rank."""
        if self.rollout_rank:
            return self.rollouts.run_worker(self)
        return super().train(resume, resume_from_checkpoint)

    # ------------------------------------------------------------------ what a subclass supplies
    @abstractmethod
    def advantages(self, batch: Batch) -> torch.Tensor:
        """Per-token advantages [B, C] for a whole iteration's batch (groups complete)."""

    @abstractmethod
    def loss(self, batch: Batch, logprobs: torch.Tensor, entropy: torch.Tensor, **outputs) -> dict[str, torch.Tensor]:
        """Named per-token loss terms [B, C]; the base class aggregates, sums and adds the KL term.

        Receives every entry of `forward(batch)` as a keyword argument.
        """

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        """Model outputs for one micro-batch, with gradients: log-probs and entropies [B, C] (float32) of the
        sampled tokens, 0 where `loss_mask` is not set (policies/logprobs.py: sampled_token_outputs)."""
        logprobs, entropy, _ = sampled_token_outputs(self.policy, batch, self.config.temperature)
        return {"logprobs": logprobs.float(), "entropy": entropy.float()}

    def lr_schedule_steps_per_iteration(self) -> None:
        """None: the trajectories selected (`select_for_update`) and replayed set an iteration's optimizer steps,
        so a named lr_scheduler_type steps once per iteration (over train_iterations)."""
        return None

    def select_for_update(self, trajectories: list[Trajectory]) -> list[Trajectory]:
        """Hook: which trajectories to train on (e.g. DAPO drops zero-variance groups)."""
        return trajectories

    @property
    def completion_budget(self) -> int:
        """Most tokens one episode may generate (the "constant" normaliser, DAPO's overlong limit)."""
        return completion_budget(self.config, self.env)

    @property
    def pad_id(self) -> int:
        return pad_id(self.policy.tokenizer)

    @property
    def prompts_per_rank(self) -> int:
        """This process's share of `prompts_per_iteration` (all of it in a single process)."""
        return self.config.prompts_per_iteration // dist.world_size()

    # ------------------------------------------------------------------ collection
    def sampling_settings(self) -> SamplingSettings:
        c = self.config
        return SamplingSettings(max_new_tokens=c.max_new_tokens, temperature=c.temperature, top_p=c.top_p,
                                max_prompt_tokens=c.max_prompt_length)

    def collect(self) -> list[Trajectory]:
        """This process's share of the iteration's batch: `samples_per_prompt` episodes for each of
        `prompts_per_rank` env resets. Every rank draws the same `prompts_per_iteration` seeds and keeps
        its own consecutive slice (group ids too), so the union over ranks is what one process collects.
        With `rollout_workers`, the trainer's groups of the batch, received from the rollout ranks."""
        if self.rollouts is not None:
            return self.rollouts.collect(self)
        share, total = self.prompts_per_rank, self.config.prompts_per_iteration
        seeds = self.rng.integers(0, 2**31 - 1, total)[dist.rank() * share:(dist.rank() + 1) * share]
        return self.sample_groups(share, self.iteration * total + dist.rank() * share, seeds)

    def sample_groups(self, num_prompts: int, first_group_id: int, seeds=None) -> list[Trajectory]:
        """`samples_per_prompt` episodes from each of `num_prompts` fresh env resets (one group each), the
        resets seeded by `seeds` (default: this rank's own draws). Sampling noise is keyed by (seed,
        iteration, group id, member), so it does not depend on how groups are spread over processes."""
        if seeds is None:
            seeds = self.local_rng.integers(0, 2**31 - 1, num_prompts)
        starts = [{"seed": int(s)} for s in seeds]
        return rollout(self.env, self.policy, starts, self.config.samples_per_prompt, self.sampling_settings(),
                       self.generator, first_group_id=first_group_id, timings=self._times,
                       sample_key=row_key(self.config.seed, self.iteration))

    # ------------------------------------------------------------------ micro-batches
    def micro_batches(self, trajectories: list[Trajectory]) -> list[list[Trajectory]]:
        """The forward passes of an update step or a scoring pass, similar lengths together: `micro_batch_size`
        trajectories each (`by_length`), or with `max_tokens_per_microbatch` as many as fit that many padded
        tokens (training/token_batches.py; under FSDP as many micro-batches on every rank). The step's loss
        does not depend on the grouping."""
        c = self.config
        budget = c.max_tokens_per_microbatch
        if not budget:
            return super().micro_batches(by_length(trajectories))
        lengths = [padded_length(t) for t in trajectories]
        groups = token_micro_batches(lengths, budget)
        if self.gradients.mode == "fsdp":  # every forward all-gathers: the ranks' counts must match
            groups = same_count_on_every_rank(groups, lengths, "max_tokens_per_microbatch")
        if not self._warned_long_trajectory and max(lengths, default=0) > budget:
            self._warned_long_trajectory = True
            warn(f"a trajectory of {max(lengths)} tokens is longer than max_tokens_per_microbatch={budget}: such "
                 f"trajectories run alone in their micro-batch (warned once)")
        return [[trajectories[i] for i in group] for group in groups]

    # ------------------------------------------------------------------ reference, KL in the reward, advantages
    def score_in_chunks(self, trajectories: list[Trajectory], token_field: TokenField, score) -> None:
        """Store `score(micro_batch)` [B, C] (no grad) on each trajectory as its per-token `token_field`,
        in the micro-batches of `micro_batches`."""
        chunks = self.micro_batches(trajectories)
        if self._bar.total is None:
            self._bar.reset(total=len(chunks))
        scores = []
        for chunk in chunks:  # every chunk queued before the first is read: the GPU never waits for the host
            with torch.no_grad():
                scores.append(score(collate(chunk, self.pad_id, self.device)).float())
        for chunk, values in zip(chunks, scores):
            for t, row in zip(chunk, values.cpu()):
                token_field.set(t, row[:len(t.completion_ids)].tolist())
            self._bar.update(1)

    @torch.no_grad()
    def prepare(self, trajectories: list[Trajectory]) -> None:
        """Reference log-probs, KL-in-reward and advantages, stored on each trajectory."""
        c = self.config
        if self.ref_policy is not None and c.kl_coeff > 0:
            with self.timed("reference"), self._phase("reference", None, "mb"):  # score_in_chunks sets the total
                self.score_in_chunks(trajectories, REF_LOGPROBS,
                                     lambda batch: ref.reference_logprobs(self.ref_policy, batch, c.temperature))
            if c.kl_in_reward:
                pay_kl_in_reward(trajectories, c.kl_coeff, self.kl_reward_per_token)
        with self.timed("advantages"):
            full = collate(trajectories, self.pad_id, "cpu", self.token_fields)
            out = self.advantages(full)
            for token_field, values in (out if isinstance(out, dict) else {ADVANTAGES: out}).items():
                if not isinstance(token_field, TokenField):
                    raise TypeError(f"{type(self).__name__}.advantages returned a dict keyed by {token_field!r}; "
                                    f"key it by TokenField (lmgym.buffers.fields)")
                for t, row in zip(trajectories, values.float()):
                    token_field.set(t, row[:len(t.completion_ids)].tolist())

    # ------------------------------------------------------------------ the update
    def update(self, trajectories: list[Trajectory]) -> dict[str, float]:
        """Epochs x minibatches (one optimizer step each) x micro-batches (gradient accumulation)."""
        c = self.config
        self.policy.model.train()
        minibatch = c.minibatch_size or len(trajectories)
        stats: dict[str, list[float]] = {}
        sizes = [min(minibatch, len(trajectories) - s) for s in range(0, len(trajectories), minibatch)]
        per_step = None if c.max_tokens_per_microbatch else sum(-(-n // c.micro_batch_size) for n in sizes)
        with self._phase("update", per_step and c.update_epochs * per_step, "mb"):  # by tokens: counted as it goes
            for _ in range(c.update_epochs):
                order = self.local_rng.permutation(len(trajectories))
                for start in range(0, len(order), minibatch):
                    chosen = [trajectories[i] for i in order[start:start + minibatch]]
                    for key, value in self.update_step(chosen).items():
                        stats.setdefault(key, []).append(value)
        self.policy.model.eval()
        return {k: float(np.mean(v)) for k, v in stats.items()}

    def update_step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        """One `optimizer_step` of the subclass's loss terms plus beta * KL (`kl_estimator`), weighted by the
        aggregation over the whole step and all processes (the same loss whatever the micro-batch size; see
        algorithms/losses.py). Records the step's token means of `entropy`, `kl` (to the reference, with
        `kl_estimator`) and `approx_kl` (always k3 of KL(behaviour || current), another quantity: how far
        the update moved from the sampling policy)."""
        c, budget = self.config, self.completion_budget
        trained = truncation_mask(trajectories, c.mask_truncated_completions)  # 0: a cut-off episode, not trained on
        step_tokens = dist.all_reduce_sum(float(sum(t.num_generated_tokens * trained[id(t)] for t in trajectories)))
        step_sequences = int(dist.all_reduce_sum(float(len(trajectories))))
        token_sums: dict[str, float] = {}  # token-weighted sums of the diagnostics, over the whole step

        def micro_loss(chunk: list[Trajectory]) -> dict[str, torch.Tensor]:
            batch = collate(chunk, self.pad_id, self.device, self.token_fields)
            if c.mask_truncated_completions:  # TRL's: the row stays (sequence counts), its tokens weigh nothing
                keep = torch.tensor([trained[id(t)] for t in chunk], dtype=batch.loss_mask.dtype)
                batch.loss_mask = batch.loss_mask * keep.to(batch.loss_mask.device)[:, None]
            outputs = self.forward(batch)
            logprobs, entropy = outputs["logprobs"], outputs["entropy"]
            terms = self.loss(batch, **outputs)
            if c.kl_coeff > 0 and not c.kl_in_reward and batch.ref_logprobs is not None:
                terms["kl"] = c.kl_coeff * kl_estimate(logprobs, batch.ref_logprobs, c.kl_estimator)
            weights = token_weights(batch.loss_mask, c.loss_aggregation, step_tokens, step_sequences, budget)
            with torch.no_grad():
                mask = batch.loss_mask.float()
                diagnostics = {"entropy": entropy, "approx_kl": kl_estimate(batch.old_logprobs, logprobs, "k3")}
                if batch.ref_logprobs is not None:
                    diagnostics["kl"] = kl_estimate(logprobs, batch.ref_logprobs, c.kl_estimator)
                for name, value in {**diagnostics, "tokens": torch.ones_like(mask)}.items():
                    # summed on the device in float64 (what float() then + did on the host), read once below:
                    # a read here would make every micro-batch wait for its forward before its backward
                    token_sums[name] = token_sums.get(name, 0.0) + (value.float() * mask).sum().double()
            return {name: (term * weights).sum() for name, term in terms.items()}

        totals = self.optimizer_step(trajectories, micro_loss)  # in `micro_batches`: similar lengths together
        token_sums = dist.all_reduce_dict({name: float(value) for name, value in token_sums.items()})
        for name in ("kl", "entropy", "approx_kl"):
            if name in token_sums:
                self.record(name, token_sums[name] / max(token_sums["tokens"], 1.0))
        return totals

    # ------------------------------------------------------------------ one iteration
    def train_iteration(self) -> dict:
        """One collect -> combine and weigh rewards -> select -> prepare -> update round; returns its metrics.

        Trajectories dropped by `select_for_update` are neither scored by the reference nor trained on,
        but count in the reward, accuracy and length metrics (they were sampled from the policy)."""
        t0 = time.perf_counter()
        with self._phase("sample", None, "tok") as bar, self.memory.phase("sample"):
            with counting_tokens(self.policy, None if bar.disable else bar.update):
                trajectories = self.collect()
        t1 = time.perf_counter()
        for t in trajectories if self.rollouts is None else ():  # rollout workers tag the version that sampled it
            t.iteration = self.iteration  # what the buffer's recent() reads
        combine_batch_rewards(trajectories, self.config.reward_combination)  # over all ranks' batch, before any use
        for name, value in weigh_rewards(trajectories, self.prm, self.config).items():  # outcome_weight, prm_weight
            self.record(name, value)
        for name, value in self.callbacks.rewards(self, trajectories).items():  # e.g. VerifierRefresh's
            self.record(name, value)
        selected = self.select_for_update(trajectories)
        if selected:
            self.prepare(selected)
        t2 = time.perf_counter()
        reused = replay.replayed(self.buffer, self.iteration, self.config.replay_iterations)
        replay.remember(self.buffer, trajectories, self.iteration, self.config.replay_iterations)
        with self.memory.phase("update"):
            update_stats = self.update(selected + reused) if selected or reused else {}
        if self.rollouts is not None:
            self.rollouts.publish(self)  # the new weights, to the rollout ranks
        t3 = time.perf_counter()
        trained = int(dist.all_reduce_sum(float(len(selected))))
        trajectories = dist.gather_lists(trajectories)  # every rank's share, in group order
        if self.config.log_completions and dist.is_main():  # the trackers send the rows too (RunLog, trackers/)
            self.logged_completions = append_completions(self.config.output_dir, self.iteration + 1, trajectories,
                                                         self.policy.tokenizer)
        generated = sum(t.num_generated_tokens for t in trajectories)
        sample_time = t1 - t0 - self._times.pop("score", 0.0)
        if self.rollouts is not None:  # the rollout ranks' sampling time; the trainers' wait for it is time_wait
            sample_time, self._times["wait"] = self.rollouts.sample_seconds, t1 - t0
        grouped = self.config.samples_per_prompt > 1  # several samples a prompt: groups can lack signal
        metrics = episode_metrics(trajectories, self.iteration + 1,
                                  zero_variance_fraction(trajectories) if grouped else None)
        metrics.update(self.tool_errors.metrics(trajectories, f"iteration {self.iteration + 1}"))
        if self.rollouts is not None:
            metrics.update(self.rollouts.metrics)
        if self.config.replay_iterations:
            metrics["replayed_trajectories"] = int(dist.all_reduce_sum(float(len(reused))))
        return {**metrics, "trained_trajectories": trained,
                "tokens_per_second": generated / max(sample_time, 1e-9),
                "time_sample": sample_time, "time_score": t1 - t0 - sample_time,
                "time_prepare": t2 - t1, "time_update": t3 - t2,
                **{f"loss_{k}" if k not in ("loss", "grad_norm") else k: v for k, v in update_stats.items()}}

    def evaluate(self) -> dict[str, float]:
        """Greedy held-out accuracy on `eval_env` (nothing without one)."""
        env, c = self.eval_env, self.config
        if env is None:
            return {}
        return evaluate_episodes(self.policy, env, c.eval_episodes, c.eval_max_new_tokens or c.max_new_tokens,
                                 progress=c.progress, tool_errors=self.tool_errors,
                                 max_prompt_tokens=c.max_prompt_length)

    # ------------------------------------------------------------------ run folder and checkpoints
    def describe(self) -> dict:
        """What config.json records: the algorithm, the model, the envs (ids and kwargs), the PRM and the config."""
        base, envs = super().describe(), {"env": self.env, "eval_env": self.eval_env}
        out = {k: v for name, env in envs.items() if env is not None
               for k, v in ((name, env_id(env)), (f"{name}_kwargs", env_kwargs(env)))}
        if self.ref_policy is not None and getattr(self.ref_policy, "name_or_path", None) != base["model"]:
            out["reference_model"] = getattr(self.ref_policy, "name_or_path", None)
        return {"algorithm": base["algorithm"], "model": base["model"], **out, **prm_description(self.prm), **base}

    def title(self) -> str:
        return f"{type(self).__name__} on {env_id(self.env)}"

    def generation_settings(self) -> dict:
        """The saved model generates as it is evaluated: greedy, with the evaluation token cap."""
        return {"do_sample": False, "max_new_tokens": self.config.eval_max_new_tokens or self.config.max_new_tokens}

    def state_dict(self) -> dict:
        """The Trainer's state, plus the reference (see algorithms/reference.py for when its weights are stored)."""
        return {**super().state_dict(), **ref.reference_state(self.ref_policy, self.ref_synced_at, self.iteration)}

    def load_state_dict(self, state: dict) -> None:
        self.ref_synced_at = ref.load_reference(self.ref_policy, state, self.ref_synced_at)
        super().load_state_dict(state)
        ref.resync_after_load(self.ref_policy, self.policy, state)
        if state.get("buffer.jsonl") is not None:
            self.buffer = state["buffer.jsonl"]

    def checkpoint_files(self) -> dict[str, CheckpointFile]:
        """The replay buffer, as buffer.jsonl."""
        return {"buffer.jsonl": CheckpointFile(self.buffer.save, ReplayBuffer.load)}
