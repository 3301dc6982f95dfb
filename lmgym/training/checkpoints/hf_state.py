"""The Hugging Face Trainer's keys of a checkpoint's `trainer_state.json`, written beside this toolkit's own.

`transformers.TrainerState` writes `global_step`, `max_steps`, `log_history` (one dict per logged row, its
step under "step"), `best_model_checkpoint`, `best_metric`, `best_global_step`, the step intervals and the
process flags; tools that read an HF checkpoint's state (plots of `log_history`, "which step is this") find them
here with the same meaning: a step is an iteration. Nothing of them is read back when resuming: the state
(training/checkpoints/layout.py) is the toolkit's own keys, `format`, `state` and `layout`.
"""
from __future__ import annotations

import math
from typing import Any

from lmgym.training import distributed as dist
from lmgym.training.metric_names import trl_names

# top-level keys of trainer_state.json that are this toolkit's (layout.py); HF's never collide with them
OWN_KEYS = ("format", "state", "layout", "model_only")


def hf_trainer_state(trainer) -> dict[str, Any]:
    """HF's `TrainerState` fields for `trainer` at its current iteration. There is no best-model tracking
    (`metric_for_best_model`) here, so `best_*` are None, as HF writes them without it."""
    c = trainer.config
    return {
        "global_step": trainer.iteration,
        "max_steps": c.train_iterations,
        "logging_steps": 1,
        "eval_steps": c.eval_every or c.train_iterations,
        "save_steps": c.save_every or c.train_iterations,
        "train_batch_size": c.micro_batch_size,
        "best_model_checkpoint": None,
        "best_metric": None,
        "best_global_step": None,
        "is_local_process_zero": dist.is_main(),
        "is_world_process_zero": dist.is_main(),
        "is_hyper_param_search": False,
        "trial_name": None,
        "trial_params": None,
        "log_history": log_history(trainer.logger.read() if trainer.logger is not None else [], trainer.iteration),
    }


def log_history(rows: list[dict[str, Any]], upto: int) -> list[dict[str, Any]]:
    """HF's `log_history` of metrics.jsonl's rows up to iteration `upto`: each row's scalars in TRL's names, as
    metrics.jsonl has them (training/metric_names.py), its iteration as "step" (non-finite floats become None, so
    that the file stays strict JSON)."""
    history = []
    for row in map(trl_names, rows):
        step = row.get("iteration")
        if not isinstance(step, int) or step > upto:
            continue
        entry: dict[str, Any] = {"step": step}
        for key, value in row.items():
            if key == "iteration" or not isinstance(value, (int, float, str, bool, type(None))):
                continue
            entry[key] = None if isinstance(value, float) and not math.isfinite(value) else value
        history.append(entry)
    return history
