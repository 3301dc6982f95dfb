"""`RLAlgorithm`: the shared core. It owns the loop; a subclass supplies its advantages and loss terms.

One iteration: collect episodes -> reference log-probs (and KL in the reward, if asked) -> advantages
-> update (epochs x minibatches x micro-batches, gradient accumulation, clipping, bf16 autocast)
-> sync the reference every N iterations -> evaluate -> log -> checkpoint.
"""
from __future__ import annotations

import math
import random
import time
from abc import ABC, abstractmethod
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from algorithms import checkpoints as ckpt
from algorithms.atomic_io import remove_tree
from algorithms import distributed as dist
from algorithms.config import ConfigError, RLConfig, field_types
from algorithms.evaluate import evaluate
from algorithms.guards import NonFiniteTrainingError, reward_failures, warn
from algorithms.kl import kl_estimate
from algorithms.losses import token_weights
from algorithms.plots import plot_metrics
from algorithms.progress import counting_tokens, phase_bar
from episodes.env_state import is_stepwise
from episodes.rollout import SamplingSettings, rollout
from algorithms.run_logger import DISCARDED, RunLogger
from buffers import ADVANTAGES, REF_LOGPROBS, Batch, ReplayBuffer, TokenField, Trajectory, collate
from policies.generation import row_key


def by_length(trajectories: list[Trajectory]) -> list[Trajectory]:
    """Trajectories sorted by total length, so micro-batches pad little (the loss does not depend on order)."""
    return sorted(trajectories, key=lambda t: len(t.prompt_ids) + len(t.completion_ids))


class RLAlgorithm(ABC):
    """Base class of every RL algorithm.

    Subclasses implement `advantages(batch)` (per-token advantages for a whole iteration's batch) and
    `loss(batch, logprobs, entropy)` (named per-token loss terms). Everything else is shared.
    Optional hooks: `forward` (model outputs the loss needs; PPO adds values), `param_groups` (extra
    trainable modules), `extra_state`/`load_extra_state` (their checkpoint), `select_for_update`.
    """

    config_class = RLConfig
    token_fields: tuple[TokenField, ...] = ()  # declared per-token fields collated into batch (PPO: old values)
    kl_reward_per_token = False         # KL-in-reward: per token (True) or summed at the last step (False)

    def __init__(self, policy, env, config: RLConfig | None = None, ref_policy=None,
                 buffer: ReplayBuffer | None = None, eval_env=None):
        self.config = self.checked_config(config)
        self.policy, self.env, self.eval_env = policy, env, eval_env
        dist.init_from_env()  # a torchrun launch: join the process group (no-op otherwise, or if joined)
        self._check_sharding()
        self.buffer = buffer if buffer is not None else ReplayBuffer(max(self.config.batch_size * 4, 1024))
        self.device = getattr(policy, "device", torch.device("cpu"))
        if hasattr(policy, "bf16"):
            policy.bf16 = self.config.bf16
        self.iteration = 0
        self.rng = np.random.default_rng(self.config.seed)  # prompt draws: the same stream on every rank
        self.local_rng = self._local_rng()                   # this rank's own draws (minibatch order, refills)
        torch.manual_seed(self.config.seed)
        self.generator = torch.Generator(device=self.device).manual_seed(self.config.seed)
        dist.broadcast_parameters(policy.parameters())  # every rank starts from rank 0's weights
        self.ref_policy = ref_policy
        if self.config.kl_coeff > 0 and self.ref_policy is None:
            self.ref_policy = policy.frozen_copy()
        self.optimizer = torch.optim.AdamW(self.param_groups(), lr=self.config.learning_rate,
                                           betas=self.config.adam_betas, weight_decay=self.config.weight_decay)
        warmup = self.config.warmup_iterations
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda step: min(1.0, (step + 1) / warmup) if warmup else 1.0)
        self.logger: RunLogger | None = None
        self._step_metrics: dict[str, list[float]] = {}
        self._times: dict[str, float] = {}  # seconds per phase in the current iteration
        self._nonfinite_streak = 0  # optimizer steps in a row skipped for a NaN/inf loss or gradient norm
        self._skipped_steps = 0     # ... and skipped in the current iteration
        self._ref_synced_at: int | None = None  # iteration of the last policy -> reference copy (None: never)
        self._bar = phase_bar("", enabled=False)  # the current phase's progress bar (micro-batches)

    @classmethod
    def checked_config(cls, config: RLConfig | None) -> RLConfig:
        """`config` (None: `config_class()`), or a one-line TypeError naming the config class expected."""
        config = cls.config_class() if config is None else config
        missing = [n for n in field_types(cls.config_class) if not hasattr(config, n)]
        if not isinstance(config, RLConfig) or missing:
            raise TypeError(f"{cls.__name__} takes a {cls.config_class.__name__}, got a {type(config).__name__}"
                            + (f" (it has no {', '.join(missing[:3])})" if missing and isinstance(config, RLConfig)
                               else ""))
        return config

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
        """Model outputs for one micro-batch, with gradients: log-probs and entropies [B, C] (float32)."""
        logprobs, entropy = self.policy.token_logprobs(batch.input_ids, batch.attention_mask,
                                                       batch.completion_positions, self.config.temperature)
        return {"logprobs": logprobs.float(), "entropy": entropy.float()}

    def param_groups(self) -> list[dict]:
        """Optimizer parameter groups (called once, in __init__); PPO adds its value model."""
        return [{"params": self.policy.parameters()}]

    def trainable_parameters(self) -> list[torch.Tensor]:
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    def extra_state(self) -> dict:
        """State of modules besides the policy (e.g. a value head), saved in checkpoints."""
        return {}

    def load_extra_state(self, state: dict) -> None:
        """Counterpart of `extra_state`."""

    @contextmanager
    def timed(self, phase: str):
        """Add the seconds spent inside to this iteration's `time_<phase>` metric."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self._times[phase] = self._times.get(phase, 0.0) + time.perf_counter() - start

    @contextmanager
    def _phase(self, desc: str, total: int | None, unit: str):
        """A transient progress bar for one phase of an iteration (off without `progress`, off rank 0);
        loops inside advance it through `self._bar`."""
        bar = phase_bar(desc, total, unit, self.config.progress and dist.is_main())
        self._bar = bar
        try:
            yield bar
        finally:
            bar.close()
            self._bar = phase_bar("", enabled=False)

    @property
    def completion_budget(self) -> int:
        """Most tokens one episode may generate (the "constant" normaliser, DAPO's overlong limit)."""
        c = self.config
        return c.loss_length_normalizer or c.max_new_tokens * (c.max_episode_steps if is_stepwise(self.env) else 1)

    def record(self, name: str, value: float | torch.Tensor) -> None:
        """Log a scalar from inside `loss` or `advantages` (averaged over the iteration)."""
        self._step_metrics.setdefault(name, []).append(float(value))

    # ------------------------------------------------------------------ processes (torchrun)
    def _check_sharding(self) -> None:
        """The global batch must split into whole groups (and whole minibatches) per rank."""
        world, c = dist.world_size(), self.config
        for name in ("prompts_per_iteration", "minibatch_size"):
            if getattr(c, name, 0) % world:
                raise ConfigError(f"{type(c).__name__}.{name} must be divisible by the number of processes "
                                  f"({world}): it is the global batch, split evenly over ranks; got "
                                  f"{getattr(c, name)}", name)

    @property
    def prompts_per_rank(self) -> int:
        """This process's share of `prompts_per_iteration` (all of it in a single process)."""
        return self.config.prompts_per_iteration // dist.world_size()

    def _local_rng(self) -> np.random.Generator:
        """This rank's generator for the current iteration, derived from (seed, iteration, rank) so a
        resumed run (any rank) continues exactly without storing it."""
        return np.random.default_rng([self.config.seed, self.iteration, dist.rank()])

    # ------------------------------------------------------------------ collection
    def sampling_settings(self) -> SamplingSettings:
        c = self.config
        return SamplingSettings(c.max_new_tokens, c.temperature, c.top_p)

    def collect(self) -> list[Trajectory]:
        """This process's share of the iteration's batch: `samples_per_prompt` episodes for each of
        `prompts_per_rank` env resets. Every rank draws the same `prompts_per_iteration` seeds and keeps
        its own consecutive slice (group ids too), so the union over ranks is what one process collects."""
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

    def score_in_chunks(self, trajectories: list[Trajectory], token_field: TokenField, score) -> None:
        """Store `score(micro_batch)` [B, C] (no grad) on each trajectory as its per-token `token_field`."""
        ordered = by_length(trajectories)
        for start in range(0, len(ordered), self.config.micro_batch_size):
            chunk = ordered[start:start + self.config.micro_batch_size]
            with torch.no_grad():
                values = score(collate(chunk, self.pad_id, self.device)).float().cpu()
            for t, row in zip(chunk, values):
                token_field.set(t, row[:len(t.completion_ids)].tolist())
            self._bar.update(1)

    @torch.no_grad()
    def prepare(self, trajectories: list[Trajectory]) -> None:
        """Reference log-probs, KL-in-reward and advantages, stored on each trajectory."""
        c = self.config
        if self.ref_policy is not None and c.kl_coeff > 0:
            chunks = -(-len(trajectories) // c.micro_batch_size)
            with self.timed("reference"), self._phase("reference", chunks, "mb"):
                self.score_in_chunks(trajectories, REF_LOGPROBS, self._reference_logprobs)
            if c.kl_in_reward:
                for t in trajectories:
                    kl = [c.kl_coeff * m * (lp - r)
                          for m, lp, r in zip(t.completion_mask, t.logprobs, REF_LOGPROBS.get(t))]
                    per_token = [-k for k in kl] if self.kl_reward_per_token else None  # else at the last step
                    t.add_shaping("kl_penalty", -sum(kl), per_token)
        with self.timed("advantages"):
            full = collate(trajectories, self.pad_id, "cpu", self.token_fields)
            out = self.advantages(full)
            for token_field, values in (out if isinstance(out, dict) else {ADVANTAGES: out}).items():
                if not isinstance(token_field, TokenField):
                    raise TypeError(f"{type(self).__name__}.advantages returned a dict keyed by {token_field!r}; "
                                    f"key it by TokenField (buffers.fields)")
                for t, row in zip(trajectories, values.float()):
                    token_field.set(t, row[:len(t.completion_ids)].tolist())

    def _reference_logprobs(self, batch: Batch) -> torch.Tensor:
        with self.reference_context():
            return self.ref_policy.token_logprobs(batch.input_ids, batch.attention_mask, batch.completion_positions,
                                                  self.config.temperature)[0]

    def reference_context(self):
        """LoRA policies share weights with their reference: disable the adapters while scoring it."""
        model = getattr(self.ref_policy, "model", None)
        if getattr(self.ref_policy, "is_lora", False) and hasattr(model, "disable_adapter"):
            return model.disable_adapter()
        return torch.no_grad()

    @property
    def pad_id(self) -> int:
        tok = self.policy.tokenizer
        return tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id

    # ------------------------------------------------------------------ optimisation
    def select_for_update(self, trajectories: list[Trajectory]) -> list[Trajectory]:
        """Hook: which trajectories to train on (e.g. DAPO drops zero-variance groups)."""
        return trajectories

    def update(self, trajectories: list[Trajectory]) -> dict[str, float]:
        """Epochs x minibatches (one optimizer step each) x micro-batches (gradient accumulation)."""
        c = self.config
        self.policy.model.train()
        minibatch = c.minibatch_size or len(trajectories)
        stats: dict[str, list[float]] = {}
        sizes = [min(minibatch, len(trajectories) - s) for s in range(0, len(trajectories), minibatch)]
        with self._phase("update", c.update_epochs * sum(-(-n // c.micro_batch_size) for n in sizes), "mb"):
            for _ in range(c.update_epochs):
                order = self.local_rng.permutation(len(trajectories))
                for start in range(0, len(order), minibatch):
                    chosen = [trajectories[i] for i in order[start:start + minibatch]]
                    for key, value in self.optimizer_step(chosen).items():
                        stats.setdefault(key, []).append(value)
        self.policy.model.eval()
        return {k: float(np.mean(v)) for k, v in stats.items()}

    def optimizer_step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        """One optimizer step over `trajectories`, accumulated over micro-batches.

        Token and sequence counts are taken over the whole step (and all processes), so the loss is
        the same whatever the micro-batch size (see algorithms/losses.py).
        """
        c = self.config
        step_tokens = dist.all_reduce_sum(float(sum(t.num_generated_tokens for t in trajectories)))
        step_sequences = int(dist.all_reduce_sum(float(len(trajectories))))
        const_len = self.completion_budget
        self.optimizer.zero_grad(set_to_none=True)
        totals: dict[str, float] = {}
        token_sums: dict[str, float] = {}  # token-weighted sums of the diagnostics, over the whole step
        trajectories = by_length(trajectories)  # length bucketing: similar lengths share a micro-batch
        for start in range(0, len(trajectories), c.micro_batch_size):
            batch = collate(trajectories[start:start + c.micro_batch_size], self.pad_id, self.device,
                            self.token_fields)
            outputs = self.forward(batch)
            logprobs, entropy = outputs["logprobs"], outputs["entropy"]
            terms = self.loss(batch, **outputs)
            if c.kl_coeff > 0 and not c.kl_in_reward and batch.ref_logprobs is not None:
                terms["kl"] = c.kl_coeff * kl_estimate(logprobs, batch.ref_logprobs, c.kl_estimator)
            weights = token_weights(batch.loss_mask, c.loss_aggregation, step_tokens, step_sequences, const_len)
            # each rank's gradient is averaged by DDP, so scale back up by the world size
            weights = weights * dist.world_size()
            loss = sum((term * weights).sum() for term in terms.values())
            loss.backward()
            for name, term in terms.items():
                totals[name] = totals.get(name, 0.0) + float((term.detach() * weights).sum()) / dist.world_size()
            with torch.no_grad():
                mask = batch.loss_mask.float()
                diagnostics = {"entropy": entropy,  # approx_kl: k3 estimate of KL(behaviour || current)
                               "approx_kl": kl_estimate(batch.old_logprobs, logprobs, "k3")}
                if batch.ref_logprobs is not None:
                    diagnostics["kl"] = kl_estimate(logprobs, batch.ref_logprobs, "k3")
                for name, value in {**diagnostics, "tokens": torch.ones_like(mask)}.items():
                    token_sums[name] = token_sums.get(name, 0.0) + float((value.float() * mask).sum())
            self._bar.update(1)
        totals = dist.all_reduce_dict(totals)  # each rank held its share of the global loss
        token_sums = dist.all_reduce_dict(token_sums)
        for name in ("kl", "entropy", "approx_kl"):
            if name in token_sums:
                self.record(name, token_sums[name] / max(token_sums["tokens"], 1.0))
        dist.sync_gradients(self.trainable_parameters())
        params = self.trainable_parameters()
        if c.max_grad_norm > 0:
            grad_norm = float(torch.nn.utils.clip_grad_norm_(params, c.max_grad_norm))
            totals["grad_norm"] = grad_norm
        else:
            grad_norm = float(torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None]))
        totals["loss"] = sum(v for k, v in totals.items() if k != "grad_norm")
        if self._finite_step(totals["loss"], grad_norm):
            self.optimizer.step()
            self.scheduler.step()
        return totals

    def _finite_step(self, loss: float, grad_norm: float) -> bool:
        """False (gradients dropped, the step to be skipped) when the loss or gradient norm is NaN/inf on
        any process; raises NonFiniteTrainingError after `max_nonfinite_steps` such steps in a row."""
        bad = not (math.isfinite(loss) and math.isfinite(grad_norm))
        if dist.all_reduce_sum(float(bad)) == 0:
            self._nonfinite_streak = 0
            return True
        self.optimizer.zero_grad(set_to_none=True)
        self._nonfinite_streak += 1
        self._skipped_steps += 1
        limit = self.config.max_nonfinite_steps
        where = f"iteration {self.iteration + 1}: non-finite loss or gradient norm (loss={loss}, grad_norm={grad_norm})"
        if self._nonfinite_streak >= limit:
            raise NonFiniteTrainingError(
                f"training stopped at {where}: {self._nonfinite_streak} optimizer steps in a row were not finite "
                f"(max_nonfinite_steps={limit}); lower learning_rate or check the rewards, then resume from the "
                f"last checkpoint")
        warn(f"{where}: optimizer step skipped ({self._nonfinite_streak} in a row, the run stops at {limit})")
        return False

    # ------------------------------------------------------------------ the loop
    def train(self, resume: bool = False) -> list[dict]:
        """Run `train_iterations` iterations (with `resume`, from the newest checkpoint that verifies, if any)."""
        c = self.config
        run_dir = Path(c.output_dir)
        if resume:
            with dist.main_first():  # rank 0 sets corrupt checkpoints aside before the others look
                self.resume_from(run_dir)
        if dist.is_main():
            continuing = self.iteration > 0
            if not continuing:
                self._start_over(run_dir, resume)
            self.logger = RunLogger(run_dir, self.describe(), c.wandb, c.wandb_project, resume=continuing)
            if continuing:
                self.logger.truncate_after(self.iteration)
        bar = tqdm(total=c.train_iterations, initial=self.iteration, disable=not (c.progress and dist.is_main()),
                   desc=type(self).__name__)
        if self.iteration == 0 and c.eval_at_start:
            self._log({"iteration": 0, **self._eval_metrics()})
        while self.iteration < c.train_iterations:
            metrics = self.train_iteration()
            self.iteration += 1
            metrics["iteration"] = self.iteration
            if c.ref_sync_every and self.iteration % c.ref_sync_every == 0 and self.ref_policy is not None:
                self.sync_reference()
            last = self.iteration == c.train_iterations
            if (c.eval_every and self.iteration % c.eval_every == 0) or last:
                metrics.update(self._eval_metrics())
            self._log(metrics)
            if (c.save_every and self.iteration % c.save_every == 0) or last:
                self.save(run_dir)
            bar.update(1)
            bar.set_postfix(reward=f"{metrics['reward_mean']:.3f}", acc=f"{metrics['train_accuracy']:.2f}")
        bar.close()
        rows = self.logger.read() if self.logger else []
        if self.logger:
            plot_metrics(rows, run_dir / "metrics.png", title=f"{type(self).__name__} on {self._env_name()}")
            self.logger.close()
        return dist.broadcast_object(rows)  # rank 0 wrote them; every rank returns the same rows

    def train_iteration(self) -> dict:
        """One collect -> select -> prepare -> update round; returns its metrics.

        Trajectories dropped by `select_for_update` are neither scored by the reference nor trained on,
        but count in the reward, accuracy and length metrics (they were sampled from the policy).
        """
        self._times = {}
        self._skipped_steps = 0
        self.local_rng = self._local_rng()
        t0 = time.perf_counter()
        with self._phase("sample", None, "tok") as bar:
            with counting_tokens(self.policy, None if bar.disable else bar.update):
                trajectories = self.collect()
        t1 = time.perf_counter()
        for t in trajectories:
            t.iteration = self.iteration  # what the buffer's recent() reads
        selected = self.select_for_update(trajectories)
        if selected:
            self.prepare(selected)
        t2 = time.perf_counter()
        self.buffer.clear()
        self.buffer.extend(trajectories)
        update_stats = self.update(selected) if selected else {}
        t3 = time.perf_counter()
        trained = int(dist.all_reduce_sum(float(len(selected))))
        trajectories = dist.gather_lists(trajectories)  # every rank's share, in group order
        generated = sum(t.num_generated_tokens for t in trajectories)
        rewards = [t.env_reward for t in trajectories]  # before KL / length shaping
        sample_time = t1 - t0 - self._times.pop("score", 0.0)
        metrics = {
            "reward_mean": float(np.mean(rewards)), "reward_std": float(np.std(rewards)),
            "train_accuracy": float(np.mean([bool(t.info.get("correct", False)) for t in trajectories])),
            "completion_length": generated / max(len(trajectories), 1),
            "truncated_fraction": float(np.mean([t.truncated for t in trajectories])),
            "trained_trajectories": trained,
            "tokens_per_second": generated / max(sample_time, 1e-9),
            "time_sample": sample_time, "time_score": t1 - t0 - sample_time,
            "time_prepare": t2 - t1, "time_update": t3 - t2,
            **{f"time_{k}": v for k, v in self._times.items()},
            "learning_rate": self.scheduler.get_last_lr()[0],
            "rewards": [round(r, 4) for r in rewards],
            **{f"loss_{k}" if k not in ("loss", "grad_norm") else k: v for k, v in update_stats.items()},
        }
        if self.config.samples_per_prompt > 1:
            metrics["zero_variance_groups"] = zero_variance_fraction(trajectories)
        metrics["skipped_nonfinite_steps"] = self._skipped_steps
        failures, first = reward_failures(trajectories)
        metrics["reward_failures"] = failures
        if failures:
            warn(f"iteration {self.iteration + 1}: a reward function failed on {failures} of {len(trajectories)} "
                 f"episodes (scored 0 for that reward); first: {first}")
        step_means = dist.all_reduce_dict({k: float(np.mean(v)) for k, v in self._step_metrics.items()})
        metrics.update({k: v / dist.world_size() for k, v in step_means.items()})  # mean over ranks
        self._step_metrics = {}
        return metrics

    def sync_reference(self) -> None:
        """Copy the current policy weights into the reference model (REINFORCE-stable's periodic reset)."""
        if getattr(self.ref_policy, "is_lora", False):
            return  # the reference of a LoRA policy is the frozen base; nothing to copy
        self.ref_policy.model.load_state_dict(self.policy.model.state_dict())
        self._ref_synced_at = self.iteration

    def _eval_metrics(self) -> dict:
        """Held-out evaluation, run once (by rank 0); every rank returns its result."""
        env = self.eval_env
        if env is None:
            return {}
        c = self.config
        result = {}
        if dist.is_main():
            result = evaluate(self.policy, env, c.eval_episodes, c.eval_max_new_tokens or c.max_new_tokens,
                              progress=c.progress)
        return {f"eval_{k}": v for k, v in dist.broadcast_object(result).items()}

    def _log(self, metrics: dict) -> None:
        if self.logger is not None:
            self.logger.log(metrics)

    def _env_name(self) -> str:
        spec = getattr(self.env, "spec", None)
        return getattr(spec, "id", None) or type(getattr(self.env, "unwrapped", self.env)).__name__

    def describe(self) -> dict:
        """What config.json records: the algorithm, the model, the envs (ids and kwargs) and the config."""
        out = {"algorithm": type(self).__name__, "model": getattr(self.policy, "name_or_path", None),
               "env": self._env_name(), "env_kwargs": env_kwargs(self.env)}
        if self.eval_env is not None:
            out.update(eval_env=env_id(self.eval_env), eval_env_kwargs=env_kwargs(self.eval_env))
        if self.ref_policy is not None and getattr(self.ref_policy, "name_or_path", None) != out["model"]:
            out["reference_model"] = getattr(self.ref_policy, "name_or_path", None)
        return {**out, **self.config.to_dict()}

    def save_model(self, directory: str | Path | None = None) -> Path | None:
        """Write the policy as a Hugging Face model folder (default `<output_dir>/model`; see
        `HFPolicy.save`), its generation config set to how it is evaluated (greedy, the eval token
        cap). A LoRA policy is saved merged, with its adapter in `model/adapter`. Written in a
        temporary folder and renamed into place. Returns the folder (None on non-main processes)."""
        if not dist.is_main():
            return None
        c = self.config
        final = Path(directory) if directory is not None else Path(c.output_dir) / "model"
        tmp = final.with_name(f".tmp-{final.name}")
        if tmp.exists():
            remove_tree(tmp)
        generation = {"do_sample": False, "max_new_tokens": c.eval_max_new_tokens or c.max_new_tokens}
        self.policy.save(tmp, generation=generation, merged=True)
        if getattr(self.policy, "is_lora", False):
            self.policy.save(tmp / "adapter", generation=generation)
        if final.exists():
            remove_tree(final)
        tmp.rename(final)
        return final

    # ------------------------------------------------------------------ checkpoints
    def save(self, run_dir: str | Path | None = None) -> Path | None:
        """Checkpoint everything needed to continue exactly (weights, optimizer, scheduler, RNG states,
        buffer, iteration) as `<run_dir>/checkpoints/iter-<N>` (see algorithms/checkpoints.py);
        keeps the newest `keep_checkpoints`. Returns the folder (None on non-main processes).

        The reference model is stored only when it can be found nowhere else: never synced, it is the
        model the algorithm was built with (rebuilt the same way to resume); synced at this very
        iteration, it equals the stored policy; synced earlier, its weights are stored."""
        if not dist.is_main():
            return None
        source = self._reference_source()
        state = {
            "iteration": self.iteration,
            "policy": self.policy.state_dict(),
            "reference": self.ref_policy.state_dict() if source == "stored" else None,
            "reference_source": source,
            "ref_synced_at": self._ref_synced_at,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "extra": self.extra_state(),
            "nonfinite_streak": self._nonfinite_streak,
            "rng": {"numpy_algorithm": self.rng.bit_generator.state, "python": random.getstate(),
                    "torch": torch.get_rng_state(), "generator": self.generator.get_state(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None},
        }
        writers = {"state.pt": lambda path: torch.save(state, path), "buffer.jsonl": self.buffer.save}
        return ckpt.write_checkpoint(run_dir if run_dir is not None else self.config.output_dir, self.iteration,
                                     writers, self.config.keep_checkpoints)

    def load(self, directory: str | Path) -> None:
        """Restore one checkpoint folder written by `save` (or the old `checkpoint/` layout).

        Raises CheckpointError (one line) for a corrupt, truncated or unsafe checkpoint; tensors and
        plain data only are unpickled (`weights_only=True`), so a checkpoint can never run code.
        """
        directory = Path(directory)
        if not (directory / "state.pt").is_file():
            raise FileNotFoundError(f"no checkpoint at {directory} (expected {directory / 'state.pt'})")
        self._apply_checkpoint(directory, *self._read_checkpoint(directory))

    def resume_from(self, run_dir: str | Path) -> Path | None:
        """Load the newest checkpoint of `run_dir` that verifies, saying which; corrupt ones are skipped
        with a warning (and renamed `corrupt-*`). Returns its folder, or None when there is none."""
        for candidate in ckpt.resume_candidates(run_dir):
            try:
                state, buffer = self._read_checkpoint(candidate.path)
            except ckpt.CorruptCheckpointError as err:
                warn(f"skipping a checkpoint that does not verify: {err}")
                if dist.is_main():
                    ckpt.set_aside_corrupt(candidate)
                continue
            self._apply_checkpoint(candidate.path, state, buffer)
            print(f"resuming from {candidate.path} (iteration {self.iteration})", flush=True)
            return candidate.path
        return None

    def _start_over(self, run_dir: Path, resume: bool) -> None:
        """Iteration 0 in a folder that may hold an earlier run: its files are moved aside, never deleted."""
        if resume:
            print(f"note: --resume: no checkpoint in {run_dir}, starting from iteration 0", flush=True)
        n = ckpt.archive_history(run_dir, (ckpt.CHECKPOINTS, ckpt.LEGACY, "metrics.jsonl", DISCARDED))
        if n is not None:
            print(f"note: {run_dir} held an earlier run; its metrics and checkpoints are kept as *.{n}.*bak",
                  flush=True)

    def _read_checkpoint(self, directory: Path) -> tuple[dict, ReplayBuffer | None]:
        """Verify a checkpoint folder and read it (nothing applied yet)."""
        ckpt.verify(directory)
        state = ckpt.load_state(directory / "state.pt")
        missing = [k for k in ("iteration", "policy", "optimizer", "scheduler", "rng") if k not in state]
        if missing:
            raise ckpt.CorruptCheckpointError(f"{directory / 'state.pt'}: not a checkpoint (no {', '.join(missing)})")
        buffer_path = directory / "buffer.jsonl"
        try:
            buffer = ReplayBuffer.load(buffer_path) if buffer_path.is_file() else None
        except ValueError as err:
            raise ckpt.CorruptCheckpointError(str(err)) from None
        return state, buffer

    def _apply_checkpoint(self, directory: Path, state: dict, buffer: ReplayBuffer | None) -> None:
        try:
            self.policy.load_state_dict(state["policy"])
            self._load_reference(directory, state)
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
            self.load_extra_state(state.get("extra", {}))
            self.rng.bit_generator.state = state["rng"]["numpy_algorithm"]
            random.setstate(state["rng"]["python"])
            torch.set_rng_state(state["rng"]["torch"])
            self.generator.set_state(state["rng"]["generator"])
            if state["rng"]["cuda"] is not None and torch.cuda.is_available():
                torch.cuda.set_rng_state_all(state["rng"]["cuda"])
        except (RuntimeError, KeyError, ValueError, TypeError) as err:
            first = next((ln.strip() for ln in str(err).splitlines() if ln.strip()), type(err).__name__)
            raise ckpt.CheckpointError(f"{directory}: does not fit this model and algorithm ({first[:200]})") from None
        self.iteration = int(state["iteration"])
        self._nonfinite_streak = int(state.get("nonfinite_streak", 0))
        if buffer is not None:
            self.buffer = buffer

    def _ref_has_own_weights(self) -> bool:
        return self.ref_policy is not None and not getattr(self.ref_policy, "is_lora", False)

    def _reference_source(self) -> str:
        """Where a checkpoint finds the reference weights: "none" (no own weights: none, or LoRA's base),
        "initial" (never synced), "policy" (synced at this iteration) or "stored"."""
        if not self._ref_has_own_weights():
            return "none"
        if self._ref_synced_at is None:
            return "initial"
        return "policy" if self._ref_synced_at == self.iteration else "stored"

    def _load_reference(self, directory: Path, state: dict) -> None:
        """Restore the reference as `save` described it (older checkpoints always stored it)."""
        source = state.get("reference_source", "stored" if state.get("reference") is not None else "none")
        if source == "initial" and self._ref_synced_at is not None:
            raise ckpt.CheckpointError(f"{directory}: its reference is the initial model, but this algorithm's "
                                       f"reference was already synced; load it into a freshly built algorithm")
        if self.ref_policy is not None and source == "stored":
            self.ref_policy.load_state_dict(state["reference"])
        elif self._ref_has_own_weights() and source == "policy":
            self.ref_policy.load_state_dict(self.policy.state_dict())
        self._ref_synced_at = state.get("ref_synced_at")


def env_id(env) -> str:
    """The registered id of an env (through wrappers), else its class name."""
    inner = getattr(env, "unwrapped", env)
    spec = getattr(env, "spec", None) or getattr(inner, "spec", None)
    return getattr(spec, "id", None) or type(inner).__name__


def env_kwargs(env) -> dict:
    """The keyword arguments an env was made with (registered defaults included), as recorded in its
    gymnasium spec; `{}` for an env built directly."""
    inner = getattr(env, "unwrapped", env)
    spec = getattr(env, "spec", None) or getattr(inner, "spec", None)
    return dict(getattr(spec, "kwargs", None) or {})


def zero_variance_fraction(trajectories: list[Trajectory]) -> float:
    """Fraction of groups whose rewards are all equal (no learning signal for group baselines)."""
    groups: dict[int, set[float]] = {}
    for t in trajectories:
        groups.setdefault(t.group_id, set()).add(round(t.env_reward, 9))
    return float(np.mean([len(r) == 1 for r in groups.values()])) if groups else 0.0
