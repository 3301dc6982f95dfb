"""Run-time guards of the training loop: non-finite optimizer steps and contained reward failures."""
from __future__ import annotations

import sys

from lmgym.buffers import Trajectory


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
