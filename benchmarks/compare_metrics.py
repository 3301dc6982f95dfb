"""Are two runs the same run? Compares two metrics.jsonl files value by value.

    python benchmarks/compare_metrics.py runs/a/metrics.jsonl runs/b/metrics.jsonl

Prints how many values the two files share (same iteration, same key; wall-clock columns such as
``time_*`` and ``tokens_per_second``, and the GPU ``memory_*`` peaks, left out), how many of them differ, and
the first iteration where one does. Used to find what moves the CPU quickstart's numerics
(statics/results/quickstart_cpu_numerics/). Both files are read in TRL's metric names (lmgym/training/
metric_names.py, loaded alone: it imports nothing of the toolkit), so a file written before the rename
(`reward_mean`, `reward_<fn>`, ...) compares with a newer one key for key.
"""
from __future__ import annotations

import argparse
import functools
import importlib.util
import json
from pathlib import Path

# columns that measure the machine, not the run: wall clock, and GPU memory peaks (the caching allocator's
# state, not the computation, sets them)
WALL_CLOCK = ("time_", "tokens_per_second", "memory_")
METRIC_NAMES = Path(__file__).resolve().parents[1] / "lmgym" / "training" / "metric_names.py"


@functools.cache
def _metric_names():
    """lmgym/training/metric_names.py, loaded from its file (once)."""
    spec = importlib.util.spec_from_file_location("lmgym_metric_names", METRIC_NAMES)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def trl_names(row: dict) -> dict:
    """`row` in TRL's metric names (metric_names.trl_names)."""
    return _metric_names().trl_names(row)


def read_rows(path: Path) -> list[dict]:
    """One dict per line of a metrics.jsonl file, in TRL's metric names (old files' names mapped)."""
    return [trl_names(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def compare(a: list[dict], b: list[dict]) -> tuple[int, list[tuple[int, str]]]:
    """(values both runs logged, [(iteration row, key) of those that differ]); rows are paired in order."""
    shared, differing = 0, []
    for index, (row_a, row_b) in enumerate(zip(a, b)):
        for key in row_a.keys() & row_b.keys():
            if any(key.startswith(p) or p in key for p in WALL_CLOCK):
                continue
            shared += 1
            if row_a[key] != row_b[key]:
                differing.append((row_a.get("iteration", index), key))
    return shared, sorted(differing)


def main() -> None:
    # toolkit-free script (no lmgym.training.cli.example_parser): no prefix matching of flags at least
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    args = parser.parse_args()
    a, b = read_rows(args.a), read_rows(args.b)
    shared, differing = compare(a, b)
    first = differing[0][0] if differing else None
    keys = sorted({k for it, k in differing if it == first})
    print(f"rows {len(a)} / {len(b)}; shared values {shared}; differing {len(differing)}"
          + (f"; first at iteration {first}: {', '.join(keys[:6])}" if differing else "; identical"))


if __name__ == "__main__":
    main()
