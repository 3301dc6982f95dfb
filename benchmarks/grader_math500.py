"""The grader on real answers nobody here wrote: MATH-500 (../shared/data/math500/test.jsonl). Offline, CPU.

    python benchmarks/grader_math500.py [--data ../shared/data/math500/test.jsonl]

Three checks, each a count of faults (0 is right):
- gold against itself (an answer always equals itself);
- gold against the answer `extract_answer` reads from the problem's own reference solution (false negatives);
- gold of problem i against the reference answer of problem i+1, i+2, i+3 where the two golds differ as text
  (false positives; a pair that is truly equal, such as `5` and `x=5`, is printed for a person to judge).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lmgym.envs.answers import answers_equal  # noqa: E402
from lmgym.envs.extraction import extract_answer  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "math500" / "test.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--show", type=int, default=10, help="how many faults of each check to print")
    args = parser.parse_args()
    if not args.data.is_file():
        sys.exit(f"{args.data}: no such file (the MATH-500 sample of ../shared/data)")
    rows = [json.loads(line) for line in args.data.read_text(encoding="utf-8").splitlines() if line.strip()]
    golds = [row["answer"] for row in rows]
    answers = [extract_answer(row["solution"]) for row in rows]
    self_faults = [g for g in golds if not answers_equal(g, g)]
    negatives = [(g, a) for g, a in zip(golds, answers) if a is None or not answers_equal(a, g)]
    pairs, positives = 0, []
    for shift in (1, 2, 3):
        for i, gold in enumerate(golds):
            j = (i + shift) % len(rows)
            if gold.replace(" ", "") == golds[j].replace(" ", ""):
                continue
            pairs += 1
            if answers[j] is not None and answers_equal(answers[j], gold):
                positives.append((gold, answers[j]))
    print(f"{len(rows)} problems")
    print(f"gold == itself: {len(self_faults)} faults")
    print(f"gold == its reference solution's answer: {len(negatives)} false negatives")
    print(f"gold == another problem's answer: {len(positives)} judged equal of {pairs} pairs")
    for title, faults in (("self", self_faults), ("negative", negatives), ("equal across problems", positives)):
        for fault in faults[:args.show]:
            print(f"  {title}: {fault!r}")


if __name__ == "__main__":
    main()
