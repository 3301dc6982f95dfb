"""maj@n, weighted maj@n and best-of-n under every scorer from a saved pool's first n samples a problem, each with
the paired bootstrap interval against maj@n, and what bounds them: pass@n and each scorer's AUC within problems.

    python benchmarks/pool_at_n.py --n 8 \
      statics/results/session32_h200/i36/vl/curves/L2_pool_second_samples.problems.jsonl.gz
    python benchmarks/pool_at_n.py --n 8 --by-operation ...   # Arithmetic pools: the same tables per operation

The pool is `evaluate_reranking`'s records (examples/verifier_loop.py's curves/L<level>_pool_samples, or
..._pool_second_samples; gzipped or not). Nothing is sampled or scored again: every choice reads the saved answers,
verdicts and scores, as the pooled curves do (`lmgym.evaluation.pool_curves`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.common import example_parser  # noqa: E402
from lmgym.core.problem_records import read_problem_records  # noqa: E402
from lmgym.envs.arithmetic import generate  # noqa: E402
from lmgym.evaluation.pool_curves import pool_curves, scorers_on_pool, scorers_on_pool_markdown  # noqa: E402
from lmgym.evaluation.search_comparison import vs_cell  # noqa: E402


def read_pool(path: Path) -> list[dict]:
    """The pool's problem records (`read_problem_records`: plain or gzipped)."""
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    records = [r for r in read_problem_records(path) if isinstance(r.get("samples"), dict)]
    if not records:
        raise ValueError(f"{path}: no problem records with a pool (samples)")
    return records


def first_n(records: list[dict], n: int) -> list[dict]:
    """Each record with its pool cut to the first `n` samples."""
    if n < 1:
        raise ValueError(f"--n must be >= 1, got {n}")
    cut = []
    for r in records:
        s = r["samples"]
        cut.append({**r, "samples": {**s, **{k: s[k][:n] for k in ("answers", "correct", "tokens")},
                                     "scores": {name: v[:n] for name, v in s["scores"].items()}}})
    return cut


def at_n(records: list[dict]) -> list[dict]:
    """Rows: maj, then each rule under each scorer, over each record's whole pool (`pool_curves` at a budget every
    pool fits): accuracy and, against maj, the paired interval as text."""
    whole = max(1, max(sum(r["samples"]["tokens"]) for r in records))
    rows, _ = pool_curves(records, [whole])
    return [{"method": r["method"], "accuracy": r["accuracy"], "vs_maj": vs_cell(r)} for r in rows]


def arithmetic_operation(problem_id: str) -> str:
    """The operators of an Arithmetic problem ("+", "-", "*"; level 3: two, "+*"; level 4: "words") from its id
    "arithmetic/L<level>/<index>"; a ValueError naming the id for any other."""
    kind, _, rest = problem_id.partition("/")
    level, _, index = rest.partition("/")
    if kind != "arithmetic" or not level[1:].isdigit() or not level.startswith("L") or not index.isdigit():
        raise ValueError(f"{problem_id!r} is not an Arithmetic problem id (arithmetic/L<level>/<index>): "
                         "--by-operation reads those")
    question = generate(int(level[1:]), int(index)).question
    return "".join(word for word in question.split() if word in ("+", "-", "*")) or "words"


def print_tables(records: list[dict], n: int) -> None:
    """The rules at n against maj with their intervals, then each scorer's AUC within problems and the reach."""
    tokens = sum(sum(r["samples"]["tokens"]) for r in records) / len(records)
    passed = sum(any(r["samples"]["correct"]) for r in records) / len(records)
    print(f"{len(records)} problem{'s' * (len(records) != 1)}, the first {n} samples of each: "
          f"{tokens:.1f} tokens a problem, pass@{n} {passed:.1%}\n")
    print("| method | accuracy | vs maj, points [95% CI] |\n|---|---|---|")
    for row in at_n(records):
        print(f"| {row['method']} | {row['accuracy']:.1%} | {row['vs_maj']} |")
    print("\n" + scorers_on_pool_markdown(scorers_on_pool(records)))


def main(argv: list[str] | None = None) -> None:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("pool", help="a pool's problem records (.problems.jsonl or .problems.jsonl.gz)")
    parser.add_argument("--n", type=int, default=8, help="samples a problem, the first n of each pool (default 8)")
    parser.add_argument("--by-operation", action="store_true",
                        help="Arithmetic pools: the tables for each operation (+, -, *) apart, after the whole pool's")
    args = parser.parse_args(argv)
    try:
        records = first_n(read_pool(Path(args.pool)), args.n)
        groups: dict[str, list[dict]] = {}
        for record in records if args.by_operation else []:
            groups.setdefault(arithmetic_operation(str(record.get("id"))), []).append(record)
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None
    print_tables(records, args.n)
    for operation, group in sorted(groups.items()):
        print(f"\n## Problems with {operation}\n")
        print_tables(group, args.n)


if __name__ == "__main__":
    main()
