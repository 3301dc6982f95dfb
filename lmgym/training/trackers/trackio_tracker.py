"""report_to trackio: a trackio run, local (trackio is local-first: a SQLite database per project in TRACKIO_DIR,
by default `$HF_HOME/trackio`; `trackio show` draws it). The project is the config's `wandb_project`, the run is
named after the run folder; scalars under TRL's names per iteration, log_completions' table as a `trackio.Table`
"completions". No dashboard is launched (`embed=False`) and trackio's CPU/GPU sampling threads are off; trackio
reaches the network only when the user points it at a Space or a server (TRACKIO_SPACE_ID, TRACKIO_SERVER_URL).
Where the run went is written to `<output_dir>/trackio_run.json`; a resumed run continues it (`resume="allow"`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lmgym.core.atomic_io import atomic_write_text
from lmgym.training.run_logger import TRACKIO_ID
from lmgym.training.trackers.base import Tracker, plain_config


class TrackioTracker(Tracker):
    """A local trackio run."""

    name = "trackio"
    module = "trackio"

    def start(self, trainer, resumed: bool) -> None:
        self.trackio = self.library()
        run_dir = Path(trainer.config.output_dir)
        self.project, self.run_name = trainer.config.wandb_project, run_dir.resolve().name
        self.run = self.trackio.init(project=self.project, name=self.run_name, config=plain_config(trainer),
                                     resume="allow" if resumed else "never", embed=False, auto_log_cpu=False,
                                     auto_log_gpu=False)
        from trackio.utils import TRACKIO_DIR

        atomic_write_text(run_dir / TRACKIO_ID, json.dumps({"project": self.project, "run": self.run_name,
                                                            "trackio_dir": str(TRACKIO_DIR)}))

    def log_scalars(self, values: dict[str, float], step: int) -> None:
        self.run.log(values, step=step)

    def log_table(self, columns: list[str], data: list[list[Any]], step: int) -> None:
        self.run.log({"completions": self.trackio.Table(columns=columns, data=data)}, step=step)

    def finish(self) -> None:
        """Finish the run, and clear it as trackio's current run (else trackio finishes it again at exit)."""
        from trackio import context_vars

        self.run.finish()
        if context_vars.current_run.get() is self.run:
            context_vars.current_run.set(None)
