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

from lmgym.algorithms import GRPO  # noqa: E402

if __name__ == "__main__":
    at = int(sys.argv[1])
    original = GRPO.end_iteration

    def end_iteration(self, metrics):
        original(self, metrics)
        if self.iteration == at:
            os.kill(os.getpid(), signal.SIGINT)

    GRPO.end_iteration = end_iteration
    sys.argv = [str(ROOT / "examples" / "quickstart.py"), *sys.argv[2:]]
    runpy.run_path(sys.argv[0], run_name="__main__")
