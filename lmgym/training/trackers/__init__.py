"""`report_to`'s trackers beside metrics.jsonl: TensorBoard, MLflow and trackio, one callback each (wandb, older,
is kept by `RunLog` with metrics.jsonl: training/run_logger.py). Each is a `Tracker` (base.py): on rank 0 only,
it opens its run when training begins, sends every logged row's scalars in TRL's names (training/metric_names.py)
at the row's iteration, log_completions' table each iteration, and closes its run when training ends.

Why not accelerate's trackers (`accelerate.tracking`: TensorBoardTracker, MLflowTracker, TrackioTracker): they
decide the main process through accelerate's `PartialState` (these trainers keep their own process group:
training/distributed.py), MLflowTracker logs through mlflow's process-wide active run with the tracking URI from
the environment only (no local store under output_dir, no stored run id to resume), none of them sends tables,
and TensorBoardTracker cannot purge the steps a resumed run plays again. What each needs is a few calls of its own
library, written here.

A tracker whose library is missing is one line naming the `[trackers]` extra: from the config (`report_to`),
before any model loads, and again from the tracker (MissingExtraError) if the library goes away in between.
"""
from __future__ import annotations

from lmgym.training.trackers.base import Tracker, scalars
from lmgym.training.trackers.mlflow_tracker import MLflowTracker
from lmgym.training.trackers.tensorboard_tracker import TensorBoardTracker
from lmgym.training.trackers.trackio_tracker import TrackioTracker

TRACKERS: dict[str, type[Tracker]] = {"tensorboard": TensorBoardTracker, "mlflow": MLflowTracker,
                                      "trackio": TrackioTracker}
MODULES = {name: tracker.module for name, tracker in TRACKERS.items()}  # report_to name -> the package it needs

__all__ = ["Tracker", "TensorBoardTracker", "MLflowTracker", "TrackioTracker", "TRACKERS", "MODULES",
           "trackers_for", "scalars"]


def trackers_for(report_to: tuple[str, ...]) -> list[Tracker]:
    """A new tracker callback for each name of `report_to` that has one here (wandb and none have none)."""
    return [TRACKERS[name]() for name in report_to if name in TRACKERS]
