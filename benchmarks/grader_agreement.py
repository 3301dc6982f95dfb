"""How often does each grader agree with labelled (predicted, gold) cases?  Offline, CPU only.

    python benchmarks/grader_agreement.py [--cases benchmarks/grader_cases/cases.jsonl] [--timeout 1.0]

Runs the default grader and ``grader="math_verify"`` (if installed) over a JSON Lines file of cases
(``predicted``, ``gold``, ``expected``, ``category``, ``source``: the published convention the label
follows; ``output``: true where ``predicted`` is a whole model output, which the default grader reads
through ``extract_answer`` first and Math-Verify extracts itself) and prints, per grader: agreement, false
positives (graded equal, labelled unequal), false negatives, timeouts (a call that used its whole CPU budget)
and the most CPU seconds one case took (this process + the grading worker); then the disagreements by
category.  The bundled cases are this project's own, written from the conventions of MATH's ``is_equiv``,
Math-Verify, lighteval, NeMo-Skills and MARIO: a development figure, not a held-out one.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import time
from collections import Counter
from pathlib import Path

from lmgym.envs.answers import answers_equal, extract_answer, start_grading_worker, worker_cpu_seconds

CASES = Path(__file__).parent / "grader_cases" / "cases.jsonl"
TIMEOUT_SHARE = 0.95  # a call that used this share of its CPU budget ran out of it


def read_cases(path: Path) -> list[dict]:
    """The labelled cases of a JSON Lines file; a case without the four fields is one clear error."""
    cases = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        case = json.loads(line)
        missing = {"predicted", "gold", "expected", "category"} - case.keys()
        if missing:
            raise SystemExit(f"{path}:{n}: case lacks {', '.join(sorted(missing))}")
        cases.append(case)
    return cases


def grade_all(cases: list[dict], grader: str, timeout: float) -> dict:
    """Verdicts and counts of one grader over the cases."""
    counts = Counter()
    max_cpu, wrong = 0.0, []
    for case in cases:
        cpu0, worker0 = time.process_time(), worker_cpu_seconds()
        predicted = case["predicted"]
        if case.get("output") and grader == "default":
            predicted = extract_answer(predicted)
        verdict = answers_equal(predicted, case["gold"], timeout, grader=grader)
        cpu = time.process_time() - cpu0 + worker_cpu_seconds() - worker0
        max_cpu = max(max_cpu, cpu)
        counts["timeouts"] += cpu >= TIMEOUT_SHARE * timeout
        if verdict == case["expected"]:
            counts["agree"] += 1
        else:
            counts["false_positives" if verdict else "false_negatives"] += 1
            wrong.append(case)
    return {"counts": counts, "max_cpu": max_cpu, "wrong": wrong}


def report(name: str, result: dict, total: int) -> None:
    c = result["counts"]
    print(f"{name:<12} agreement {c['agree']}/{total} ({100 * c['agree'] / total:.1f}%)  "
          f"false positives {c['false_positives']}  false negatives {c['false_negatives']}  "
          f"timeouts {c['timeouts']}  max CPU s per input {result['max_cpu']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=Path, default=CASES, help="JSON Lines of labelled cases")
    parser.add_argument("--timeout", type=float, default=1.0, help="CPU seconds per comparison (the default)")
    args = parser.parse_args()
    cases = read_cases(args.cases)
    start_grading_worker()
    graders = ["default"] + (["math_verify"] if importlib.util.find_spec("math_verify") else [])
    results = {g: grade_all(cases, g, args.timeout) for g in graders}
    by_category = Counter(case["category"] for case in cases)
    print(f"{len(cases)} cases in {len(by_category)} categories ({args.cases.name})")
    for grader, result in results.items():
        report(grader, result, len(cases))
    for grader, result in results.items():
        print(f"\n{grader}: disagreements by category")
        missed = Counter(case["category"] for case in result["wrong"])
        for category, n in sorted(by_category.items()):
            print(f"  {category:<20} {n - missed[category]}/{n}")
        for case in result["wrong"]:
            print(f"    expected {case['expected']!s:<5} {case['predicted']!r} vs {case['gold']!r}")


if __name__ == "__main__":
    main()
