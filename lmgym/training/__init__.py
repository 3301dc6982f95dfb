"""What every trainer shares: the `Trainer` loop (optimizer, run folder, logging, plots, resume), its callbacks,
configuration (`TrainerConfig`, checked fields, YAML files, CLI flags, TRL's names), checkpoints, the trackers of
`report_to` and the metric names they share with metrics.jsonl (TRL's; `read_metrics` reads old run folders too),
and distributed set-up (DDP, FSDP2 through torch.distributed)."""
from lmgym.training.callbacks import EarlyStopping, TrainerCallback
from lmgym.training.checkpoints import CheckpointError, CorruptCheckpointError
from lmgym.training.cli import add_config_arguments, config_from_arguments, run_with_clear_errors
from lmgym.training.config import ConfigError, TrainerConfig, load_config, setting
from lmgym.training.guards import NonFiniteTrainingError
from lmgym.training.metric_names import read_metrics  # (its trl_names stays there: training.trl_names is a module)
from lmgym.training.plots import plot_metrics, plot_run
from lmgym.training.run_logger import RunLogger
from lmgym.training.trackers import MLflowTracker, TensorBoardTracker, TrackioTracker
from lmgym.training.trainer import Trainer

__all__ = [
    "Trainer", "TrainerConfig", "TrainerCallback", "EarlyStopping", "ConfigError", "load_config", "setting",
    "add_config_arguments", "config_from_arguments", "run_with_clear_errors",
    "CheckpointError", "CorruptCheckpointError", "NonFiniteTrainingError", "RunLogger", "plot_run", "plot_metrics",
    "read_metrics", "TensorBoardTracker", "MLflowTracker", "TrackioTracker",
]
