"""Callbacks: code that runs at fixed points of a `Trainer`'s loop, passed as `callbacks=[...]` to any trainer.

In the shape of transformers' `TrainerCallback`: subclass `TrainerCallback` and override the hooks you need (each
is a no-op here). Every hook gets the trainer first (its `config`, `iteration`, `policy`, ...); the loop calls
them in this order (`HOOK_ORDER`):

    on_train_begin(trainer)                       once, after resuming, before the evaluation at start
    [on_evaluate(trainer, metrics), on_log(trainer, row)]   iteration 0, with eval_at_start
    per iteration:
      on_iteration_begin(trainer)                 before `train_iteration`; `trainer.iteration` is the last done
      on_rewards(trainer, trajectories) -> dict   RL only: the episodes' rewards are weighed, before selection
      on_iteration_end(trainer, metrics)          `trainer.iteration` counts this iteration; before evaluation
      on_evaluate(trainer, metrics)               when it evaluates (eval_every, the last iteration)
      on_log(trainer, row)                        the iteration's row, as metrics.jsonl gets it
      on_save(trainer, path)                      after a checkpoint is written (path None off rank 0)
    on_train_end(trainer, rows)                   the run's rows; rows is None when Ctrl-C stopped it

`on_rewards` returns metrics to record (averaged into the iteration's row); the others return nothing.
To stop a run, a callback sets `trainer.should_stop = True` (`EarlyStopping` does): the loop finishes the current
iteration (evaluation, log, a checkpoint) and `train()` returns normally. Under torchrun every process must
set it alike (decide from what every process sees the same, such as the logged rows). The trainer's own callbacks come
first, in `trainer.callbacks`, then the ones passed, in the order given: `VerifierRefresh` (algorithms/prm/
refresh.py, GRPO's `refresh`), `ReferenceSync` (algorithms/reference.py, `ref_sync_every`), `RunPlots`
(training/plots.py) and `RunLog` (metrics.jsonl, config.json and wandb: training/run_logger.py).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from lmgym.training.metric_names import internal_name

HOOK_ORDER = ("on_train_begin", "on_iteration_begin", "on_rewards", "on_iteration_end", "on_evaluate", "on_log",
              "on_save", "on_train_end")


class TrainerCallback:
    """Base class of callbacks: every hook does nothing (see the module docstring for when each runs)."""

    def on_train_begin(self, trainer) -> None:
        """Once, when `train()` starts (after a resume), before the evaluation at start."""

    def on_iteration_begin(self, trainer) -> None:
        """Before each iteration's `train_iteration`."""

    def on_rewards(self, trainer, trajectories: list) -> dict[str, float]:
        """RL algorithms: this process's episodes once their rewards are combined and weighed (a PRM scored them),
        before selection; returns metrics to record."""
        return {}

    def on_iteration_end(self, trainer, metrics: dict[str, Any]) -> None:
        """After `trainer.iteration` counts the finished iteration, before evaluation, logging and saving."""

    def on_evaluate(self, trainer, metrics: dict[str, Any]) -> None:
        """After an evaluation: its metrics, prefixed `eval_` (empty without anything to evaluate on)."""

    def on_log(self, trainer, row: dict[str, Any]) -> None:
        """A row of the run's metrics (training and evaluation), on every process."""

    def on_save(self, trainer, path) -> None:
        """After a checkpoint is written to `path` (None on the processes that wrote no folder)."""

    def on_train_end(self, trainer, rows: list[dict] | None) -> None:
        """When `train()` ends: the run's rows, or None when Ctrl-C stopped it (TrainingInterrupted follows)."""


class CallbackList:
    """Calls a hook on each of `callbacks` in order; `on_rewards` merges what they return."""

    def __init__(self, callbacks: Sequence[TrainerCallback] = ()):
        self.callbacks = list(callbacks)
        for callback in self.callbacks:
            if not isinstance(callback, TrainerCallback):
                raise TypeError(f"callbacks: {type(callback).__name__} is not a TrainerCallback "
                                f"(lmgym.training.callbacks); subclass it and override the hooks you need")

    def __iter__(self):
        return iter(self.callbacks)

    def __len__(self) -> int:
        return len(self.callbacks)

    def __getitem__(self, index: int) -> TrainerCallback:
        return self.callbacks[index]

    def add(self, callback: TrainerCallback, index: int | None = None) -> None:
        """Add `callback` at `index` (default: last)."""
        CallbackList([callback])  # type check
        self.callbacks.insert(len(self.callbacks) if index is None else index, callback)

    def call(self, hook: str, trainer, *args) -> None:
        for callback in self.callbacks:
            getattr(callback, hook)(trainer, *args)

    def rewards(self, trainer, trajectories: list) -> dict[str, float]:
        out: dict[str, float] = {}
        for callback in self.callbacks:
            out.update(callback.on_rewards(trainer, trajectories))
        return out


class EarlyStopping(TrainerCallback):
    """Stops the run when `metric` (a logged key, e.g. "eval_accuracy"; in the toolkit's names or TRL's, as
    metrics.jsonl has them: "reward" is "reward_mean") has not improved for `patience` rows that hold it. `mode`:
    "max" (higher is better) or "min"; an improvement beats the best by more than `min_delta`. Rows without the
    metric (iterations that did not evaluate) do not count."""

    def __init__(self, metric: str, patience: int = 3, mode: str = "max", min_delta: float = 0.0):
        if mode not in ("max", "min"):
            raise ValueError(f"EarlyStopping: mode must be 'max' or 'min', got {mode!r}")
        if patience < 1:
            raise ValueError(f"EarlyStopping: patience must be >= 1, got {patience}")
        self.metric, self.patience, self.mode, self.min_delta = metric, patience, mode, min_delta
        self.best: float | None = None
        self.waited = 0      # rows with the metric since the best
        self.stopped_at: int | None = None  # the iteration after which it stopped the run

    def improved(self, value: float) -> bool:
        if self.best is None:
            return True
        return value > self.best + self.min_delta if self.mode == "max" else value < self.best - self.min_delta

    def on_log(self, trainer, row: dict[str, Any]) -> None:
        value = row.get(internal_name(self.metric))
        if value is None or not math.isfinite(float(value)):
            return
        if self.improved(float(value)):
            self.best, self.waited = float(value), 0
            return
        self.waited += 1
        if self.waited >= self.patience:
            trainer.should_stop = True
            self.stopped_at = trainer.iteration
