"""examples/quickstart.py whose process sends itself SIGINT (a real Ctrl-C signal) when iteration
`--sigint_at` ends, so that the interrupted run is the same every time:
`python sigint_child.py N <quickstart flags>`."""
from __future__ import annotations

import os
import runpy
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))  # as `python examples/quickstart.py` has it: the script imports `common`

from lmgym.algorithms import GRPO  # noqa: E402
from lmgym.training.callbacks import TrainerCallback  # noqa: E402


class SigintAt(TrainerCallback):
    def __init__(self, at: int):
        self.at = at

    def on_iteration_end(self, trainer, metrics):
        if trainer.iteration == self.at:
            os.kill(os.getpid(), signal.SIGINT)


if __name__ == "__main__":
    at = int(sys.argv[1])
    original = GRPO.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.callbacks.add(SigintAt(at))

    GRPO.__init__ = __init__
    sys.argv = [str(ROOT / "examples" / "quickstart.py"), *sys.argv[2:]]
    runpy.run_path(sys.argv[0], run_name="__main__")
