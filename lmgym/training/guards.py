"""Run-time guards of the training loop: Ctrl-C, non-finite optimizer steps and contained reward failures.

Ctrl-C during training: finish the iteration, checkpoint it, stop with one line.

While `Trainer.train` runs its loop inside `StopRequests`, the first SIGINT only asks to stop: the
iteration in progress finishes (its work is kept), its checkpoint is written like any other (atomically:
never half a checkpoint), and `TrainingInterrupted` is raised. A second SIGINT stops at once with
`TrainingInterrupted` too, the newest complete checkpoint being the one to resume from. The examples'
`run_with_clear_errors` turns it into the one line "interrupted at iteration N; resume with --resume" and
exit status 130 (128 + SIGINT, as shells report), without a traceback.
"""
from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from lmgym.buffers import Trajectory
from lmgym.training import distributed as dist

EXIT_STATUS = 130  # 128 + SIGINT


class NonFiniteTrainingError(ValueError):
    """Too many optimizer steps in a row had a NaN/inf loss or gradient norm; the run stops.

    A ValueError, so the examples' one-line error handler (lmgym.training.cli.run_with_clear_errors)
    reports it as `error: ...` without a traceback.
    """


def warn(message: str) -> None:
    """One `warning: ...` line on stderr."""
    print(f"warning: {' '.join(message.split())}", file=sys.stderr, flush=True)


def reward_failures(trajectories: list[Trajectory]) -> tuple[int, str | None]:
    """How many trajectories had a reward function fail (`outcome.reward_errors` non-empty), and the
    first failure as "name: ExceptionType: message" (None when there was none)."""
    failed = [t.outcome.reward_errors for t in trajectories if t.outcome.reward_errors]
    if not failed:
        return 0, None
    name, message = next(iter(failed[0].items()))
    return len(failed), f"{name}: {message}"


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped by Ctrl-C; the message (one line) says where and how to resume. A KeyboardInterrupt,
    so code that already handles Ctrl-C still does."""


class StopRequests:
    """A context in which SIGINT asks to stop (`requested()`) instead of raising, once; a second SIGINT
    raises KeyboardInterrupt at once. Off the main thread (where signals cannot be handled) it does nothing."""

    def __init__(self) -> None:
        self._asked = False
        self._previous: Any = None

    def __enter__(self) -> StopRequests:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self._asked:
            raise KeyboardInterrupt
        self._asked = True

    def requested(self) -> bool:
        """Whether any process was asked to stop (every process must call it: with several, a collective)."""
        return dist.all_reduce_sum(float(self._asked)) > 0


def interrupted_line(iteration: int, run_dir: str | Path, saved: bool) -> str:
    """The one line printed on Ctrl-C; `saved`: a checkpoint of `iteration` was just written (else the run
    stopped during iteration + 1, and resuming continues from the newest complete checkpoint)."""
    if saved:
        return f"interrupted at iteration {iteration}; resume with --resume (run folder {run_dir})"
    return (f"interrupted during iteration {iteration + 1}; resume with --resume (from the newest complete "
            f"checkpoint in {run_dir})")
