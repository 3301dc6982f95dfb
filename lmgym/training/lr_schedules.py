"""The learning-rate schedule of a trainer: today's warmup-then-constant one-liner, or one of transformers'.

`lr_scheduler_type` None keeps the schedule this toolkit always had (LambdaLR: linear warmup whose first
step is at 1/warmup_iterations, then constant), written by hand and kept as it is so that every recorded
run (tests/golden/traces.json) stays bit-identical. A name is `transformers.get_scheduler(name, optimizer,
num_warmup_steps=warmup_iterations, num_training_steps=...)`, TRL's meaning, for the schedules that need
no other argument (SCHEDULES). Both are LambdaLRs, whose state (the step count) `scheduler.pt` keeps.

When a trainer's optimizer steps per iteration are fixed up front (SFT, DPO, the PRM trainer: one), a named
schedule steps with every optimizer step over train_iterations x that many; otherwise (RL, where the
selected and replayed trajectories set the count) it steps once per iteration over train_iterations, and
warmup_iterations then counts iterations (the same thing when an iteration is one optimizer step).
"""
from __future__ import annotations

import torch

from lmgym.core.messages import did_you_mean

# transformers.SchedulerType values that need nothing but the warmup and the number of steps
SCHEDULES = ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
             "inverse_sqrt")
# the others, and what they would need
NEEDS_MORE = {"warmup_stable_decay": "num_decay_steps", "cosine_with_min_lr": "min_lr",
              "cosine_warmup_with_min_lr": "min_lr", "reduce_lr_on_plateau": "a metric at every step",
              "greedy": "a metric at every step"}


def schedule_problem(name: str | None) -> str | None:
    """Why `name` is no lr_scheduler_type here (one line listing those accepted), or None when it is one."""
    if name is None or name in SCHEDULES:
        return None
    accepted = ", ".join(SCHEDULES)
    if name in NEEDS_MORE:
        return (f"{name!r} needs {NEEDS_MORE[name]}, which is not a setting here; use None (constant after the "
                f"warmup) or one of {accepted}")
    return f"{name!r} is not a schedule{did_you_mean(name, SCHEDULES, repr)}; use None or one of {accepted}"


def build_scheduler(optimizer: torch.optim.Optimizer, name: str | None, warmup: int,
                    total_steps: int) -> torch.optim.lr_scheduler.LRScheduler:
    """The LambdaLR for `name` (None: warmup over `warmup` steps, then constant) over `total_steps` scheduler steps."""
    if name is None:  # the toolkit's schedule since the first recorded run: kept bit-identical
        return torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: min(1.0, (step + 1) / warmup) if warmup else 1.0)
    problem = schedule_problem(name)
    if problem is not None:
        raise ValueError(f"lr_scheduler_type {problem}")
    from transformers import get_scheduler  # only a named schedule pays for importing transformers

    return get_scheduler(name, optimizer, num_warmup_steps=warmup, num_training_steps=total_steps)
