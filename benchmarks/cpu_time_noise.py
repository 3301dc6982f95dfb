"""How much the CPU time of the same work swings on this machine: the test suite's CPU-time bounds and the grading
worker's CPU budgets assume it does not swing much.

Runs one sympy simplify (a grading-sized request) and a plain-Python yardstick (a million additions) `--runs`
times, each with the garbage collector off and sympy's cache cleared, and prints each run's CPU seconds and the
max/min ratio. On 2026-11-29 (the CI machine kind, 2 cores) the simplify took 0.036-2.28 s (63x) and the
yardstick 0.051-0.345 s (statics/results/session17_cpu/cpu_time_noise.json); a slow simplify was not followed by a
slow yardstick run.

    python benchmarks/cpu_time_noise.py --runs 10 --out cpu_time_noise.json
"""
from __future__ import annotations

import argparse
import gc
import json
import time


def simplify_once() -> float:
    """CPU seconds of one uncached simplify of sec(y)^2 - tan(y)^2 - 1."""
    from sympy import sec, simplify, symbols, tan
    from sympy.core.cache import clear_cache

    y = symbols("y")
    clear_cache()
    start = time.process_time()
    simplify(sec(y) ** 2 - tan(y) ** 2 - 1)
    return time.process_time() - start


def yardstick_once() -> float:
    """CPU seconds of a million additions."""
    start = time.process_time()
    total = 0
    for i in range(1_000_000):
        total += i ^ (i >> 3)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each piece of work")
    parser.add_argument("--out", default="", help="a JSON file for the figures (printed either way)")
    args = parser.parse_args()
    simplify_once()  # imports and first-call costs out of the figures
    gc.disable()
    pairs = [(simplify_once(), yardstick_once()) for _ in range(max(1, args.runs))]
    gc.enable()
    report = {}
    for name, values in (("simplify_s", [p[0] for p in pairs]), ("yardstick_s", [p[1] for p in pairs])):
        report[name] = [round(v, 4) for v in values]
        report[name.replace("_s", "_max_over_min")] = round(max(values) / max(min(values), 1e-9), 1)
    print(json.dumps(report, indent=1))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
