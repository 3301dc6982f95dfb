"""report_to tensorboard: `torch.utils.tensorboard.SummaryWriter` event files in `<output_dir>/tensorboard/`
(`tensorboard --logdir <output_dir>`). Scalars under TRL's names at each iteration; log_completions' table as
text "completions" (a markdown table); the config as text "config". A resumed run purges the steps after its
checkpoint (`purge_step`), which it plays again; a new run in a used folder moves the earlier events aside with
the metrics (training/checkpoints/trainer_state.py `start_over`)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lmgym.training.run_logger import TENSORBOARD
from lmgym.training.trackers.base import Tracker, plain_config


def markdown_table(columns: list[str], data: list[list[Any]]) -> str:
    """`columns` and `data` as a markdown table (TensorBoard's text plugin draws it); `|` and line breaks in a
    cell are escaped, so a completion's text cannot break the table."""
    def cell(value: Any) -> str:
        return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", "<br>")

    lines = ["| " + " | ".join(map(cell, columns)) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in data]
    return "\n".join(lines)


class TensorBoardTracker(Tracker):
    """TensorBoard event files in `<output_dir>/tensorboard/`."""

    name = "tensorboard"
    module = "tensorboard"

    def start(self, trainer, resumed: bool) -> None:
        self.library()
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(trainer.config.output_dir) / TENSORBOARD
        self.writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=trainer.iteration + 1 if resumed else None)
        if not resumed:
            config = json.dumps(plain_config(trainer), indent=2)
            self.writer.add_text("config", "```\n" + config + "\n```", 0)

    def log_scalars(self, values: dict[str, float], step: int) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def log_table(self, columns: list[str], data: list[list[Any]], step: int) -> None:
        self.writer.add_text("completions", markdown_table(columns, data), step)
        self.writer.flush()

    def finish(self) -> None:
        self.writer.close()
