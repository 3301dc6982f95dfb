"""`Tracker`: the callback shape every `report_to` tracker shares (rank 0 only; start, scalars, table, finish)."""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from lmgym.core.extras import import_extra
from lmgym.training import distributed as dist
from lmgym.training.callbacks import TrainerCallback
from lmgym.training.completions_log import completions_table
from lmgym.training.metric_names import trl_names


def scalars(row: Mapping[str, Any]) -> dict[str, float]:
    """A logged row's numbers in TRL's names, without its iteration (the step): lists, strings and None left out."""
    return {key: float(value) for key, value in trl_names(row).items()
            if key != "iteration" and isinstance(value, (int, float))}


def plain_config(trainer) -> dict[str, Any]:
    """The trainer's described config as plain JSON values (what a tracker stores as the run's config)."""
    return json.loads(json.dumps(trainer.describe(), default=str))


class Tracker(TrainerCallback):
    """A tracker as a callback: `start` when training begins (rank 0; `resumed` when the run continues from a
    checkpoint), `log_scalars` for each logged row at its iteration, `log_table` for log_completions' table at the
    iteration it was sampled in, `finish` when training ends (also on Ctrl-C). Subclasses set `name` (report_to's)
    and `module` (the package of the `[trackers]` extra it needs) and implement the four methods."""

    name = ""
    module = ""

    def __init__(self) -> None:
        self.active = False

    @property
    def feature(self) -> str:
        return f"report_to {self.name}"

    def library(self):
        """The tracker's package, imported (MissingExtraError, one line naming the extra, when it is missing)."""
        return import_extra(self.module, self.feature)

    def start(self, trainer, resumed: bool) -> None:
        raise NotImplementedError

    def log_scalars(self, values: dict[str, float], step: int) -> None:
        raise NotImplementedError

    def log_table(self, columns: list[str], data: list[list[Any]], step: int) -> None:
        raise NotImplementedError

    def finish(self) -> None:
        raise NotImplementedError

    def on_train_begin(self, trainer) -> None:
        if dist.is_main():
            self.start(trainer, resumed=trainer.iteration > 0)
            self.active = True

    def on_log(self, trainer, row: dict[str, Any]) -> None:
        if self.active:
            values = {key: value for key, value in scalars(row).items() if math.isfinite(value)}
            self.log_scalars(values, int(row.get("iteration", trainer.iteration)))

    def on_iteration_end(self, trainer, metrics: dict[str, Any]) -> None:
        table = completions_table(trainer) if self.active else None
        if table is not None:
            self.log_table(*table, step=trainer.iteration)

    def on_train_end(self, trainer, rows: list[dict] | None) -> None:
        if self.active:
            self.active = False
            self.finish()
