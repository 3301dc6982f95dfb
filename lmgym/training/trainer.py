"""`Trainer`: what every training loop here shares, whatever it learns from.

`train()` runs `train_iteration()` (the one method a subclass must write) `train_iterations` times
around the shared machinery: resume, evaluation (at start, every N, last), checkpoints
(training/checkpoints/trainer_state.py), progress bars, and the callbacks (training/callbacks.py), among them the run
folder's log (config.json from `describe()`, metrics.jsonl, wandb: `RunLog`; report_to's other trackers:
training/trackers/) and plots (metrics.png and the
reward plots: `RunPlots`). `optimizer_step(items, micro_loss)` is one AdamW step over
micro-batches: gradient accumulation, gradients averaged over processes (torch DDP or one all-reduce:
training/data_parallel.py), clipping, the non-finite guard. RL algorithms are `RLAlgorithm(Trainer)`
(algorithms/base.py); a supervised trainer takes a few dozen lines (tests/test_trainer.py).
"""
from __future__ import annotations

import math
import random
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from lmgym.policies.base import TrainableModel, TrainablePolicy
from lmgym.policies.contract import check_contract
from lmgym.policies.loading.hub import hub_preflight, push_folder
from lmgym.policies.loading.lora_config import lora_description
from lmgym.policies.loading.quantization import quantization_description
from lmgym.training import distributed as dist
from lmgym.training import fsdp
from lmgym.training.callbacks import CallbackList, TrainerCallback
from lmgym.training.checkpoints import sharded as sharded_checkpoints
from lmgym.training.checkpoints import trainer_state
from lmgym.training.config import TrainerConfig, checked_config
from lmgym.training.data_parallel import GradientAverager
from lmgym.training.guards import NonFiniteTrainingError, StopRequests, TrainingInterrupted, interrupted_line, warn
from lmgym.training.lr_schedules import build_scheduler
from lmgym.training.model_card import write_trainer_cards
from lmgym.training.phase_memory import PhaseMemory
from lmgym.training.plots import RunPlots
from lmgym.training.progress import phase_bar
from lmgym.training.run_logger import RunLog, RunLogger, check_history
from lmgym.training.trackers import trackers_for


class Trainer(ABC):
    """The loop, optimizer, run folder, checkpoints and evaluation hook of any trainer.

    A subclass writes `train_iteration()` (one iteration's work, returning its metrics), usually with
    `optimizer_step`. Optional hooks: `param_groups` (what AdamW trains), `evaluate` (held-out
    metrics, logged as `eval_*`), `state_dict`/`load_state_dict` (checkpoint state entries of its own),
    `checkpoint_files` (other checkpoint files), `extra_state`/`load_extra_state` (modules besides the policy, stored
    under "extra"), `describe` (config.json), `generation_settings` (the saved model's generation config).
    Code that runs at points of the loop without subclassing goes in `callbacks` (training/callbacks.py): the
    trainer's own (`RunPlots`, `RunLog`; subclasses add theirs) first, then the ones given, in order.
    """

    config_class = TrainerConfig
    policy_contract: type = TrainableModel  # what it calls on its policy (policies/base.py); refused without it
    plot_panels: Sequence = (("loss", ["loss", "eval_loss"], "loss"),)   # metrics.png (see training/plots.py)
    progress_metrics: dict[str, tuple[str, str]] = {"loss": ("loss", ".4f")}  # bar label -> (metric, format)

    def __init__(self, policy, config: TrainerConfig | None = None,
                 callbacks: Sequence[TrainerCallback] | None = None):
        self.config = self.checked_config(config)
        self.callbacks = CallbackList([RunPlots(), RunLog(), *trackers_for(getattr(self.config, "report_to", ())),
                                       *(callbacks or ())])
        self.should_stop = False  # a callback sets it to end the run after the current iteration
        self.hub_api: Any = None  # push_to_hub's uploader (None: huggingface_hub.HfApi; tests: a local stand-in)
        self.policy = self.checked_policy(policy)
        dist.init_from_env()  # a torchrun launch: join the process group (no-op otherwise, or if joined)
        self.device = getattr(policy, "device", torch.device("cpu"))
        if hasattr(policy, "bf16"):
            policy.bf16 = self.config.bf16
        self.iteration = 0
        self.rng = np.random.default_rng(self.config.seed)  # draws shared by every rank (e.g. which prompts)
        self.local_rng = self._local_rng()                   # this rank's own draws, renewed each iteration
        torch.manual_seed(self.config.seed)
        # Python's own, which checkpoints store (rng_state.pth) and user code may draw from
        random.seed(self.config.seed)
        self.generator = torch.Generator(device=self.device).manual_seed(self.config.seed)
        dist.broadcast_parameters(policy.parameters())  # every rank starts from rank 0's weights
        self.before_data_parallel()  # copies of the policy, while it can still be copied
        self.enable_gradient_checkpointing()  # after the copies (a reference needs none), before compiling and sharding
        self.compile_models()
        # DDP, FSDP or the all-reduce (more than one process)
        self.gradients = GradientAverager(policy, self.config.data_parallel,
                                          keep_gathered=not self.config.fsdp_reshard_after_forward)
        c = self.config
        groups = [{**group, "params": list(group["params"])} for group in self.param_groups()]
        self.optimizer = torch.optim.AdamW(groups, lr=c.learning_rate, betas=c.adam_betas,
                                           weight_decay=c.weight_decay, foreach=fsdp.optimizer_foreach(groups))
        # None: today's schedule, stepped per optimizer step; a name: per step when their count is known up front
        steps = self.lr_schedule_steps_per_iteration()
        self._schedule_per_iteration = c.lr_scheduler_type is not None and steps is None
        self.scheduler = build_scheduler(self.optimizer, c.lr_scheduler_type, c.warmup_iterations,
                                         c.train_iterations * (steps or 1))
        self.logger: RunLogger | None = None
        self._step_metrics: dict[str, list[float | torch.Tensor]] = {}
        self._times: dict[str, float] = {}  # seconds per phase in the current iteration
        self.memory = PhaseMemory(self.device)  # peak CUDA memory per phase (training/phase_memory.py)
        self._nonfinite_streak = 0  # optimizer steps in a row skipped for a NaN/inf loss or gradient norm
        self._skipped_steps = 0     # ... and skipped in the current iteration
        self._bar = phase_bar("", enabled=False)  # the current phase's progress bar

    @classmethod
    def checked_config(cls, config: TrainerConfig | None) -> TrainerConfig:
        """`config` (None: `config_class()`), or a one-line TypeError naming the config class expected."""
        return checked_config(cls.__name__, cls.config_class, config)

    @classmethod
    def checked_policy(cls, policy: Any) -> Any:
        """`policy` when it has every member of `policy_contract`, each method callable as declared, else a
        one-line TypeError naming what it lacks."""
        return check_contract(policy, cls.policy_contract, cls.__name__)

    @classmethod
    def checked_reference(cls, ref_policy: Any) -> Any:
        """A given reference policy (None: none) when it has what a KL reference needs (`TrainablePolicy`: its
        log-probs, and weights a re-sync can load), else a one-line TypeError naming what it lacks."""
        if ref_policy is None:
            return None
        return check_contract(ref_policy, TrainablePolicy, f"{cls.__name__}'s ref_policy")

    # ------------------------------------------------------------------ what a subclass supplies
    @abstractmethod
    def train_iteration(self) -> dict[str, Any]:
        """One iteration's work; returns its metrics (the loop adds learning_rate, timings, `record`ed means)."""

    def lr_schedule_steps_per_iteration(self) -> int | None:
        """Optimizer steps each iteration makes when fixed up front: a named lr_scheduler_type then steps with
        each of them; None (the count varies): it steps once per iteration (training/lr_schedules.py)."""
        return self.config.optimizer_steps_per_iteration()

    def evaluate(self) -> dict[str, float]:
        """Held-out metrics (logged with an `eval_` prefix); run by rank 0 alone; nothing by default."""
        return {}

    def before_data_parallel(self) -> None:  # noqa: B027  (an optional hook: a no-op by default)
        """Hook in __init__ once every rank holds rank 0's weights, before the policy is wrapped (DDP) or
        sharded (FSDP, whose modules cannot be copied): where copies of the policy (a KL reference) are made."""

    def checkpointed_models(self) -> list:
        """What `gradient_checkpointing` applies to: the models trained with gradients (the policy; PPO adds a
        critic of its own), never a frozen reference."""
        return [self.policy]

    def enable_gradient_checkpointing(self) -> None:
        """`gradient_checkpointing`: each of `checkpointed_models()` checkpoints its decoder layers (their
        `enable_gradient_checkpointing()`; one without it is a one-line TypeError). Off, a model built with it
        on keeps it."""
        if not self.config.gradient_checkpointing:
            return
        for model in self.checkpointed_models():
            enable = getattr(model, "enable_gradient_checkpointing", None)
            if not callable(enable):
                raise TypeError(f"{type(self).__name__}: gradient_checkpointing is on, but its {type(model).__name__} "
                                f"has no enable_gradient_checkpointing()")
            enable()

    def compile_models(self) -> None:
        """`torch_compile`: compile the policy's decoder layers (subclasses add models of their own)."""
        if self.wants_compile() and hasattr(self.policy, "compile_layers"):
            self.policy.compile_layers(self.config.torch_compile_backend)

    def wants_compile(self) -> bool:
        """Whether to compile the trained (under FSDP: sharded) layers: `torch_compile`, and when it is None, on
        CUDA (where it shortens the update and the reference pass; see benchmarks/RESULTS.md) unless under
        FSDP. There the layers are compiled before `fully_shard` (FSDP2's hooks stay outside the compiled code)
        only when asked for: two CPU ranks check it (tests/test_fsdp.py), and W2 on 2x H200 ran at 1.92x one
        GPU's tokens/s with it against 1.67x eager (benchmarks/RESULTS.md, user scale, third figures)."""
        c = self.config
        if c.torch_compile is not None:
            return c.torch_compile
        return self.device.type == "cuda" and not (c.data_parallel == "fsdp" and dist.world_size() > 1)

    def wants_frozen_compile(self) -> bool:
        """Whether to compile whole frozen copies (a KL reference): `torch_compile`, None meaning on CUDA, FSDP
        or not (a copy is never sharded)."""
        c = self.config
        return c.torch_compile if c.torch_compile is not None else self.device.type == "cuda"

    def param_groups(self) -> list[dict]:
        """Optimizer parameter groups (called once, in __init__)."""
        return [{"params": self.policy.parameters()}]

    def trainable_parameters(self) -> list[torch.Tensor]:
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    def extra_state(self) -> dict:
        """State of modules besides the policy (e.g. a value head), saved in checkpoints under "extra"."""
        return {}

    def load_extra_state(self, state: dict) -> None:  # noqa: B027  (an optional hook: a no-op by default)
        """Counterpart of `extra_state`."""

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint's state holds (training/checkpoints/layout.py splits it into files); a subclass adds
        entries to `super().state_dict()`."""
        return trainer_state.core_state(self)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Counterpart of `state_dict` (with each of `checkpoint_files` read, under its name)."""
        trainer_state.load_core_state(self, state)

    def checkpoint_files(self) -> dict[str, trainer_state.CheckpointFile]:
        """Files a checkpoint holds besides the trainer's state: name -> CheckpointFile(write, read)."""
        return {}

    def describe(self) -> dict[str, Any]:
        """What config.json records: the trainer, the model, how it is adapted and loaded (its LoRA adapters'
        settings and its quantization, each None when it has none) and the config."""
        model = getattr(self.policy, "model", None)
        return {"algorithm": type(self).__name__, "model": getattr(self.policy, "name_or_path", None),
                "lora": lora_description(model), "quantization": quantization_description(model),
                **self.config.to_dict()}

    def title(self) -> str:
        """The plot's title."""
        return type(self).__name__

    def generation_settings(self) -> dict | None:
        """Generation config fields of the saved model (`save_model`); None: the model's own."""
        return None

    # ------------------------------------------------------------------ helpers for subclasses
    def record(self, name: str, value: float | torch.Tensor) -> None:
        """Log a scalar from anywhere in an iteration (averaged over the iteration, then over processes). A tensor
        is read when the iteration ends, not now: a read inside a micro-batch would stall the GPU queue."""
        self._step_metrics.setdefault(name, []).append(value.detach() if isinstance(value, torch.Tensor) else value)

    @contextmanager
    def timed(self, phase: str):
        """Add the seconds spent inside to this iteration's `time_<phase>` metric; on CUDA its peak memory is
        `memory_peak_gb_<phase>` (training/phase_memory.py)."""
        start = time.perf_counter()
        try:
            with self.memory.phase(phase):
                yield
        finally:
            self._times[phase] = self._times.get(phase, 0.0) + time.perf_counter() - start

    @contextmanager
    def _phase(self, desc: str, total: int | None, unit: str):
        """A transient progress bar for one phase of an iteration (off without `progress`, off rank 0);
        `optimizer_step` and loops inside advance it through `self._bar`."""
        bar = phase_bar(desc, total, unit, self.config.progress and dist.is_main())
        self._bar = bar
        try:
            yield bar
        finally:
            bar.close()
            self._bar = phase_bar("", enabled=False)

    def _local_rng(self) -> np.random.Generator:
        """This rank's generator for the current iteration, derived from (seed, iteration, rank) so a
        resumed run (any rank) continues exactly without storing it."""
        return np.random.default_rng([self.config.seed, self.iteration, dist.rank()])

    # ------------------------------------------------------------------ one optimizer step
    def micro_batches(self, items: Sequence) -> list[Sequence]:
        """How `optimizer_step` splits `items` into forward/backward passes: consecutive runs of
        `micro_batch_size` (RL algorithms may size them by tokens: `RLAlgorithm.micro_batches`)."""
        size = self.config.micro_batch_size
        return [items[start:start + size] for start in range(0, len(items), size)]

    def optimizer_step(self, items: Sequence, micro_loss: Callable[[Sequence], dict[str, torch.Tensor]]
                       ) -> dict[str, float]:
        """One optimizer step over `items`, in the micro-batches of `micro_batches(items)` (gradient accumulation).

        `micro_loss(chunk)` returns named scalar loss terms: this micro-batch's share of the step's loss on
        this process, so that the terms of every micro-batch and process sum to the step's loss. Returns
        those sums (over processes too), `loss` (their total) and `grad_norm` (when clipping). The step is
        skipped when the loss or the gradient norm is not finite (see `_finite_step`).
        """
        c, world = self.config, dist.world_size()
        self.optimizer.zero_grad(set_to_none=True)
        totals: dict[str, float] = {}
        chunks = self.micro_batches(items)
        for k, chunk in enumerate(chunks):
            with self.gradients.micro_batch(last=k == len(chunks) - 1):  # DDP syncs in the last backward only
                terms = micro_loss(chunk)
                # DDP and the all-reduce average the ranks' gradients: scale up by the world size
                (sum(terms.values()) * world).backward()
            for name, term in terms.items():  # float64 sums on the device, read once after the last backward
                totals[name] = totals.get(name, 0.0) + term.detach().double()
            self._bar.update(1)
        totals = dist.all_reduce_dict({name: float(value) for name, value in totals.items()})  # each rank's share
        params = self.trainable_parameters()
        self.gradients.finish(params)
        grad_norm = self.gradients.clip_grad_norm(params, c.max_grad_norm)
        if c.max_grad_norm > 0:
            totals["grad_norm"] = grad_norm
        totals["loss"] = sum(v for k, v in totals.items() if k != "grad_norm")
        if self._finite_step(totals["loss"], grad_norm):
            self.optimizer.step()
            if not self._schedule_per_iteration:
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
    def train(self, resume: bool = False, resume_from_checkpoint: bool | str | Path | None = None) -> list[dict]:
        """Run `train_iterations` iterations (with `resume`, from the newest checkpoint that verifies, if
        any); returns the run's metrics rows (on every process). `resume_from_checkpoint` as in the HF Trainer:
        True resumes from the newest complete checkpoint in output_dir (none there: a one-line CheckpointError),
        a path from that checkpoint folder. With `push_to_hub`, the hub is checked first (`hub_preflight`)."""
        c = self.config
        run_dir = Path(c.output_dir)
        trainer_state.refuse_symlinked_entries(run_dir)  # every rank: each stops with the same line
        if c.push_to_hub:  # before any work: a push that cannot happen is refused now, not after training
            dist.main_result(lambda: hub_preflight(c.push_to_hub, dry_run=c.hub_dry_run, hub_api=self.hub_api))
        resumed = None
        named = c.resume_from_checkpoint if resume_from_checkpoint is None else resume_from_checkpoint
        resume, resume_from_checkpoint, restart = trainer_state.after_restart(run_dir, resume, named)  # torchrun's
        if resume_from_checkpoint not in (None, False):
            resumed = trainer_state.resume_named(self, run_dir, resume_from_checkpoint)
            resume = True
        elif resume:  # rank 0 sets corrupt checkpoints aside before the others look (FSDP: every rank loads at once)
            with nullcontext() if sharded_checkpoints.is_sharded(self) else dist.main_first():
                resumed = self.resume_from(run_dir)
        if resumed is not None:  # rank 0 reads metrics.jsonl; rows missing before the checkpoint stop every rank
            dist.main_result(lambda: check_history(run_dir, self.iteration, resumed))
        if dist.is_main() and self.iteration == 0:
            trainer_state.start_over(run_dir, resume, restart)
        self.should_stop = False
        self.callbacks.call("on_train_begin", self)  # RunLog opens the run's log (rank 0)
        bar = tqdm(total=c.train_iterations, initial=self.iteration, disable=not (c.progress and dist.is_main()),
                   desc=type(self).__name__)
        if self.iteration == 0 and c.eval_at_start:
            self._log({"iteration": 0, **self._eval_metrics()})
        with StopRequests() as stop:  # Ctrl-C: finish this iteration, checkpoint it, stop (training/guards.py)
            while self.iteration < c.train_iterations and not self.should_stop:
                started = self.iteration
                try:
                    stopping = self._train_step(run_dir, bar, stop)
                except TrainingInterrupted:
                    raise
                except KeyboardInterrupt:  # a second Ctrl-C: at once, from the newest complete checkpoint
                    self._stop(bar, interrupted_line(started, run_dir, saved=False))
                if stopping:
                    self._stop(bar, interrupted_line(self.iteration, run_dir, saved=True))
        bar.close()
        # rank 0 wrote them; every rank returns the same rows
        rows = dist.broadcast_object(self.logger.read() if self.logger else [])
        self.callbacks.call("on_train_end", self, rows)  # RunPlots draws them, RunLog closes the log
        return rows

    def _train_step(self, run_dir: Path, bar, stop: StopRequests) -> bool:
        """One iteration of `train`'s loop: train, evaluate, log, checkpoint, each with its callbacks. Returns
        whether Ctrl-C asks to stop now (before the last iteration: its checkpoint is written); a callback's
        `should_stop` also ends the loop after a checkpoint, without an interruption."""
        c = self.config
        self.callbacks.call("on_iteration_begin", self)
        metrics = self.run_iteration()
        self.iteration += 1
        metrics["iteration"] = self.iteration
        self.callbacks.call("on_iteration_end", self, metrics)  # ReferenceSync re-syncs the reference
        last, stopping = self.iteration == c.train_iterations, stop.requested()
        if (c.eval_every and self.iteration % c.eval_every == 0) or last:
            metrics.update(self._eval_metrics())
        self._log(metrics)
        if (c.save_every and self.iteration % c.save_every == 0) or last or stopping or self.should_stop:
            self.callbacks.call("on_save", self, self.save(run_dir))
        bar.update(1)
        bar.set_postfix({label: format(metrics[key], spec) for label, (key, spec) in self.progress_metrics.items()
                         if key in metrics})
        return stopping and not last

    def _stop(self, bar, line: str) -> None:
        """End the run on Ctrl-C: close the progress bar, tell the callbacks (`on_train_end` with rows None: RunLog
        closes the log, wandb too), raise TrainingInterrupted."""
        bar.close()
        self.callbacks.call("on_train_end", self, None)
        raise TrainingInterrupted(line) from None

    def run_iteration(self) -> dict[str, Any]:
        """`train_iteration()` with the metrics every iteration logs: timings, peak CUDA memory per phase
        (none on a CPU), learning rate, skipped steps and the means of `record`ed values (averaged over processes)."""
        self._times, self._skipped_steps = {}, 0
        self.local_rng = self._local_rng()
        with self.memory.iteration():
            metrics = self.train_iteration()
        if self._schedule_per_iteration:
            self.scheduler.step()
        metrics.update({f"time_{k}": v for k, v in self._times.items()})
        metrics.update(self.memory.metrics())
        metrics["learning_rate"] = self.scheduler.get_last_lr()[0]
        metrics["skipped_nonfinite_steps"] = self._skipped_steps
        step_means = dist.all_reduce_dict({k: float(np.mean([float(x) for x in v]))
                                           for k, v in self._step_metrics.items()})
        metrics.update({k: v / dist.world_size() for k, v in step_means.items()})
        self._step_metrics = {}
        return metrics

    def _eval_metrics(self) -> dict[str, float]:
        """`evaluate()`, run once (by rank 0; under FSDP by every rank, since a sharded layer's forward is a
        collective); every rank returns rank 0's result, prefixed `eval_`, and on CUDA this process's
        peak memory while evaluating, `memory_peak_gb_evaluate` (training/phase_memory.py)."""
        with self.memory.phase("evaluate", top=True):
            result = self.evaluate() if dist.is_main() or self.gradients.mode == "fsdp" else {}
        peaks = self.memory.metrics()  # read even when unused, so that the next iteration starts afresh
        out = {f"eval_{k}": v for k, v in dist.broadcast_object(result).items()}
        self.callbacks.call("on_evaluate", self, out)
        return {**out, **peaks} if out else out  # no evaluation (no eval env): no measurement of it

    def _log(self, metrics: dict) -> None:
        """A row of the run's metrics to every callback's `on_log` (RunLog writes it, on rank 0)."""
        self.callbacks.call("on_log", self, metrics)

    # ------------------------------------------------------------------ checkpoints and the model folder
    def save(self, run_dir: str | Path | None = None) -> Path | None:
        """Checkpoint all it takes to continue exactly, as `<run_dir or output_dir>/checkpoint-<N>`.
        Under FSDP every rank must call it: each writes its shards (training/checkpoints/sharded.py)."""
        return trainer_state.save_checkpoint(self, run_dir)

    def load(self, directory: str | Path) -> None:
        """Restore a checkpoint folder of `save`; a bad one is a one-line CheckpointError (it never runs code).
        Under FSDP every rank must call it, with as many ranks as wrote it."""
        trainer_state.load_checkpoint(self, directory)

    def resume_from(self, run_dir: str | Path) -> Path | None:
        """Load the newest checkpoint of `run_dir` that verifies (corrupt ones set aside); None: none."""
        return trainer_state.resume_checkpoint(self, run_dir)

    def save_model(self, directory: str | Path | None = None, hub_api: Any = None) -> Path | None:
        """Write the policy as a Hugging Face model folder (default `<output_dir>/model`; see
        `HFPolicy.save`) with `generation_settings()`; a LoRA policy is saved merged, with its adapter in
        `model/adapter`. Written aside and renamed into place. Its model cards (README.md) carry the run's
        algorithm, env, datasets, config and last evaluation (training/model_card.py); with
        `config.push_to_hub` the folder is then uploaded there (`hub_api`: lmgym.policies.loading.hub.push_folder's).
        Returns the folder (None off rank 0). Under FSDP every rank must call it: the shards are gathered
        on rank 0, which writes."""
        final = Path(directory) if directory is not None else Path(self.config.output_dir) / "model"
        if sharded_checkpoints.is_sharded(self):
            folder = trainer_state.write_sharded_model_folder(self.policy, final, self.generation_settings())
        elif dist.is_main():
            folder = trainer_state.write_model_folder(self.policy, final, self.generation_settings())
        else:
            return None
        if folder is not None:
            write_trainer_cards(self, folder)
            if self.config.push_to_hub and self.config.hub_dry_run and hub_api is None:
                print(f"hub_dry_run: {folder} would be pushed to https://huggingface.co/{self.config.push_to_hub} "
                      f"(not uploaded)", flush=True)
            elif self.config.push_to_hub:
                push_folder(folder, self.config.push_to_hub, hub_api=hub_api or self.hub_api)
                print(f"pushed {folder} to https://huggingface.co/{self.config.push_to_hub}", flush=True)
        return folder
