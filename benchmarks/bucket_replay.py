"""What other kept-bucket rules would have made: a traced run's bucket requests (benchmarks/w4_multistep.py
--decoder_set bucket_trace=[] writes <out stem>.<workload>.buckets.json) replayed under the admission rule and
least recently used alone, at several aging periods and budgets (policies/decoding/bucket_admission.replay).

    python benchmarks/bucket_replay.py w4.w4a.buckets.json
    python benchmarks/bucket_replay.py w4.w4a.buckets.json --age_every 256,1024,4096 --budget_scales 0.5,1,1.5

A bucket made is a graph captured on CUDA (two eager warm-up steps and a capture), so "made" is the figure to
lower. The requests a workload makes do not depend on what was kept, so the replay is exact for the traced run's
own settings (the first row with its rule reproduces the run's counters).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lmgym.policies.decoding.bucket_admission import AGE_EVERY, replay  # noqa: E402


def numbers(text: str, kind=float) -> list:
    return [kind(part) for part in text.split(",") if part.strip()]


def table(trace: list[dict], ages: list[int], scales: list[float]) -> list[dict]:
    """One row per (budget scale, rule, aging period): the replay's counts."""
    rows = []
    for scale in scales:
        rows.append({"budget_scale": scale, "rule": "least recently used", "age_every": None,
                     **replay(trace, admit_by_use=False, budget_scale=scale)})
        for age in ages:
            rows.append({"budget_scale": scale, "rule": "admission", "age_every": age,
                         **replay(trace, admit_by_use=True, age_every=age, budget_scale=scale)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace", help="a <out stem>.<workload>.buckets.json file")
    parser.add_argument("--age_every", default=f"{AGE_EVERY},1024,4096",
                        help="aging periods (requests), comma-separated")
    parser.add_argument("--budget_scales", default="0.5,1,1.5", help="multiples of the traced budgets, comma-separated")
    args = parser.parse_args()
    try:
        trace = json.loads(Path(args.trace).read_text())["requests"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise SystemExit(f"{args.trace}: not a bucket trace ({type(err).__name__}: {err})") from None
    print(f"{args.trace}: {sum('key' in e for e in trace):,} requests")
    print("| budget x | rule | age every | hits | made | evicted | transient |\n|---:|---|---:|---:|---:|---:|---:|")
    for row in table(trace, numbers(args.age_every, int), numbers(args.budget_scales)):
        print(f"| {row['budget_scale']:g} | {row['rule']} | {row['age_every'] or '-'} | {row['hits']:,} | "
              f"{row['made']:,} | {row['evicted']:,} | {row['transient']:,} |")


if __name__ == "__main__":
    main()
