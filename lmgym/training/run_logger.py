"""Run folder: resolved config, metrics.jsonl (one line per iteration), PNG plots, optional wandb.

metrics.jsonl and wandb get TRL's metric names (`rewards/<fn>/mean`, `completions/mean_length`, ...:
training/metric_names.py); `read()` gives the rows back in the toolkit's own names, from files written before
the rename too.

With wandb on, the run's id is kept in `wandb_run.json`; a resumed run (`--resume` that found a
checkpoint) passes it back to `wandb.init(id=..., resume="allow")` and so continues the same W&B run.

metrics.jsonl is append-only and flushed to disk per line. A line cut short by a kill is ignored
when reading and set aside on resume; rows logged after the checkpoint a run resumes from are moved
to metrics.discarded.jsonl (never deleted), and the file is rewritten atomically. A resume whose
metrics.jsonl lacks rows up to the checkpoint's iteration is refused (`check_history`).

`RunLog` is the callback by which every `Trainer` keeps this log (training/callbacks.py).
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from lmgym.core.atomic_io import append_synced, atomic_write_text, move_aside
from lmgym.core.jsonl import read_json
from lmgym.training import distributed as dist
from lmgym.training.callbacks import TrainerCallback
from lmgym.training.completions_log import COMPLETIONS, completions_table
from lmgym.training.metric_names import internal_names, trl_names

DISCARDED = "metrics.discarded.jsonl"
WANDB_ID = "wandb_run.json"  # the W&B run's id, so that --resume continues that run (wandb.init(id=..., resume=))
TENSORBOARD = "tensorboard"  # report_to tensorboard's event files (training/trackers/)
MLFLOW_ID = "mlflow_run.json"  # report_to mlflow's run id and tracking URI, so that a resume continues that run
TRACKIO_ID = "trackio_run.json"  # report_to trackio's project, run and folder
_WANDB_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


def archive_history(run_dir: str | os.PathLike, names: tuple[str, ...]) -> int | None:
    """Move the given entries of a run folder aside as `<stem>.<n>.<suffix>.bak` (one free n for all).

    Used when a run starts over in a folder that already has a history: nothing is deleted.
    Returns n, or None when there was nothing to move.
    """
    run_dir = Path(run_dir)
    present = [name for name in names if os.path.lexists(run_dir / name)]  # a link is moved itself
    if not present:
        return None
    n = 1
    while any(os.path.lexists(run_dir / _archived(name, n)) for name in names):
        n += 1
    for name in present:
        move_aside(run_dir / name, run_dir / _archived(name, n))
    return n


def _archived(name: str, n: int) -> str:
    stem, dot, suffix = name.partition(".")
    return f"{stem}.{n}.{suffix}.bak" if dot else f"{stem}.{n}.bak"


def read_wandb_id(run_dir: Path) -> str | None:
    """The W&B run id stored in `run_dir` by an earlier start, or None (none stored, or not a plain id: a
    new W&B run is then started, with a warning when the file was there but unusable)."""
    path = run_dir / WANDB_ID
    if not path.is_file():
        return None
    try:
        run_id = read_json(path).get("id")
    except (ValueError, AttributeError, OSError):
        run_id = None
    if not isinstance(run_id, str) or not _WANDB_ID.match(run_id):
        print(f"warning: {path}: no usable W&B run id; --resume starts a new W&B run", file=sys.stderr)
        return None
    return run_id


class MetricsHistoryError(ValueError):
    """metrics.jsonl lacks rows that the checkpoint being resumed from has trained; one line, naming the file."""


def check_history(run_dir: str | Path, iteration: int, checkpoint: str | Path) -> None:
    """Before a run resumes from `checkpoint` (at `iteration`): a MetricsHistoryError line unless
    `<run_dir>/metrics.jsonl` holds a row for every iteration 1..`iteration`.

    Refused rather than rebuilt: a checkpoint holds no logged rows (`trainer_state.json` has the
    iteration, the guards' counters, the reference's bookkeeping and the file layout; the other files
    weights, optimizer, scheduler and RNG states), so the missing rows exist nowhere else. Resuming
    anyway would end with a metrics.jsonl, plots and returned rows that start at the resume point,
    without a word. Rows after `iteration` (to be redone) are `RunLogger.truncate_after`'s concern.
    """
    path = Path(run_dir) / "metrics.jsonl"
    remedy = ("checkpoints do not hold the logged rows, so they cannot be rebuilt: put the file back (a copy, "
              "or a metrics.<n>.jsonl.bak of this run), or run without --resume to start over")
    if not path.is_file():
        raise MetricsHistoryError(f"{path}: missing, but {checkpoint} has trained {iteration} iterations; {remedy}")
    logged = {row["iteration"] for _, _, row in metric_lines(path) if row and isinstance(row.get("iteration"), int)}
    missing = [i for i in range(1, iteration + 1) if i not in logged]
    if missing:
        raise MetricsHistoryError(f"{path}: no rows for {len(missing)} of the {iteration} iterations {checkpoint} "
                                  f"has trained (the first missing: iteration {missing[0]}); {remedy}")


def metric_lines(path: Path) -> list[tuple[int, str, dict[str, Any] | None]]:
    """(line number, raw line, parsed row or None: not a JSON object) for each non-empty line of `path`."""
    if not path.exists():
        return []
    out = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            row = row if isinstance(row, dict) else None
        except ValueError:
            row = None
        out.append((number, line, row))
    return out


class RunLogger:
    """Appends metrics to `<run>/metrics.jsonl` and mirrors them to wandb when enabled."""

    def __init__(self, run_dir: str | Path, config: dict[str, Any], wandb_mode: str = "off",
                 project: str = "rlgym", resume: bool = False):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = self.run_dir / "metrics.jsonl"
        atomic_write_text(self.run_dir / "config.json", json.dumps(config, indent=2, default=str))
        if not resume:  # a new run in a used folder: the earlier history is moved aside, not deleted
            archive_history(self.run_dir, ("metrics.jsonl", DISCARDED, COMPLETIONS))
        self._wandb = None
        if wandb_mode != "off":
            try:
                import wandb
            except ImportError:
                raise RuntimeError("wandb logging asked for but wandb is not installed: pip install wandb") from None
            run_id = read_wandb_id(self.run_dir) if resume else None  # --resume: the same W&B run, continued
            self._wandb = wandb.init(project=project, mode=wandb_mode, dir=str(self.run_dir), config=config,
                                     name=self.run_dir.name, id=run_id, resume="allow" if resume else None)
            atomic_write_text(self.run_dir / WANDB_ID, json.dumps({"id": self._wandb.id, "project": project}))

    def truncate_after(self, iteration: int) -> None:
        """On resume, keep the rows up to `iteration` (the checkpoint's); later rows (produced again by
        the resumed run) and a line cut short by a kill go to metrics.discarded.jsonl. Atomic."""
        if not self.metrics_path.exists():
            return
        kept, dropped = [], []
        for line, row in self._lines():
            ok = row is not None and row.get("iteration", -1) <= iteration
            (kept if ok else dropped).append(line)
        content = self.metrics_path.read_bytes()
        if not dropped and (not content or content.endswith(b"\n")):
            return
        # a kill before the rewrite below may repeat these rows in the side file: set aside twice, never lost
        append_synced(self.run_dir / DISCARDED, "".join(line + "\n" for line in dropped))
        atomic_write_text(self.metrics_path, "".join(line + "\n" for line in kept))

    def log(self, metrics: dict[str, Any]) -> None:
        """Append a row (in the toolkit's names) to metrics.jsonl and wandb, in TRL's names."""
        metrics = trl_names(metrics)
        append_synced(self.metrics_path, json.dumps(metrics, default=float) + "\n")
        if self._wandb is not None:
            self._wandb.log(metrics, step=int(metrics.get("iteration", 0)))

    def log_table(self, columns: list[str], data: list[list[Any]], step: int) -> None:
        """log_completions' table of an iteration to wandb (a wandb.Table "completions"), when wandb is on."""
        if self._wandb is not None:
            import wandb

            self._wandb.log({"completions": wandb.Table(columns=columns, data=data)}, step=step)

    def read(self) -> list[dict[str, Any]]:
        """The rows of metrics.jsonl in the toolkit's names (`internal_names`: TRL's names and the old ones alike);
        a line that does not parse (cut short by a kill) is left out."""
        return [internal_names(row) for _, row in self._lines() if row is not None]

    def _lines(self) -> list[tuple[str, dict[str, Any] | None]]:
        """(raw line, parsed row or None) for each non-empty line; a warning for each unreadable one."""
        out = []
        for number, line, row in metric_lines(self.metrics_path):
            if row is None:
                print(f"warning: {self.metrics_path}:{number}: unreadable line (cut short by a kill?) is ignored",
                      file=sys.stderr)
            out.append((line, row))
        return out

    def close(self, plots: bool = True) -> None:
        """Finish the wandb run, with the run folder's plots (*.png) logged as images (`plots`)."""
        if self._wandb is not None:
            import wandb

            images = ({f"plots/{p.stem}": wandb.Image(str(p)) for p in sorted(self.run_dir.glob("*.png"))}
                      if plots else {})
            if images:
                self._wandb.log(images)
            self._wandb.finish()
            self._wandb = None


class RunLog(TrainerCallback):
    """A trainer's run log as a callback, on rank 0: opens a `RunLogger` as `trainer.logger` when training begins
    (config.json from `describe()`; wandb per `wandb`, `wandb_project`; a resumed run keeps the rows up to its
    checkpoint), appends each logged row, and closes it when training ends (with the plots sent to wandb, unless
    Ctrl-C stopped the run)."""

    def on_train_begin(self, trainer) -> None:
        if not dist.is_main():
            return
        c, continuing = trainer.config, trainer.iteration > 0
        trainer.logger = RunLogger(c.output_dir, trainer.describe(), c.wandb, c.wandb_project, resume=continuing)
        if continuing:
            trainer.logger.truncate_after(trainer.iteration)

    def on_log(self, trainer, row: dict[str, Any]) -> None:
        if trainer.logger is not None:
            trainer.logger.log(row)

    def on_iteration_end(self, trainer, metrics: dict[str, Any]) -> None:
        table = completions_table(trainer)
        if trainer.logger is not None and table is not None:
            trainer.logger.log_table(*table, step=trainer.iteration)

    def on_train_end(self, trainer, rows: list[dict] | None) -> None:
        if trainer.logger is not None:
            trainer.logger.close(plots=rows is not None)
