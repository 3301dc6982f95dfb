"""Every trainer computes what it computed before the package split (tests/golden/traces.json, recorded at
fb6f618): bit for bit on a CPU of the recording's kind, within float noise on another (its vector unit
orders sums differently)."""
import json
import math
from pathlib import Path

import torch

from tests.golden_traces import traces

GOLDEN = Path(__file__).parent / "golden" / "traces.json"


def _close(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6)
    return a == b


def test_every_trainer_traces_as_recorded():
    golden = json.loads(GOLDEN.read_text())
    threads = torch.get_num_threads()
    try:
        fresh = traces()
    finally:
        torch.set_num_threads(threads)
    if torch.backends.cpu.get_cpu_capability() == golden["cpu_capability"] and torch.__version__.startswith(golden["torch"]):
        assert fresh == golden["traces"]
    else:
        without_digests = {k: {"rows": v["rows"]} for k, v in fresh.items()}
        assert _close(without_digests, {k: {"rows": v["rows"]} for k, v in golden["traces"].items()})
