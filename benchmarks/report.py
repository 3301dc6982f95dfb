"""Recompute every headline number of a results folder from its per-problem records, beside the aggregates.

    python benchmarks/report.py runs/my_eval                 # every *.problems.jsonl (or .jsonl.gz) under it
    python benchmarks/report.py statics/results              # also lists the aggregates kept without records

Each `<name>.problems.jsonl` (core/problem_records.py; gzipped or not) is read, its numbers recomputed with the
toolkit's own definitions, by the records' `kind`:

- ``sampled`` (lmgym.evaluation.evaluate): accuracy, and with k > 1 pass@k (unbiased from n samples), any@k, maj@k;
- ``rag`` (search.evaluate_rag): EM, F1, their untagged-reply readings, MRR, recall@3, recall, searches, tokens;
- ``reflection`` (algorithms.evaluate_reflection): p1@t1, m1@tT, p1@tT, final accuracy, acc@tk, w2r@tk, r2w@tk
  and, with 2 or more turns, the critic's rates (lmgym.evaluation.reflection_critic_metrics: false alarms, misses,
  unclear verdicts, keep after approval, fixed after rejection, broken after an alarm or an approval);
- ``verifier`` (algorithms.evaluate_verifier), per verifier and level: the solution-level accuracy, AUC and
  ECE of the scores, best-of-N, maj@N, weighted maj@N, pass@N and the samples' accuracy;
- ``search`` (search.evaluate_search), per method: accuracy, tokens per problem, problems;
- ``search_curves`` (search.evaluate_curves), per method and budget ("maj/96"): the same;
- ``pipeline`` (examples/pipeline.py's <stage>/eval.json), per suite and method: the same.

and printed as a table beside the value the aggregate `<name>.json` next to it holds ("-": not in it). An
aggregate file of a known kind without a records file next to it is listed as "aggregates only: rerun to
recompute" (nothing is made up for it). Exits 1 when a recomputed number differs from its aggregate.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lmgym.core.problem_records import GZIP_SUFFIX, SUFFIX, aggregate_of, read_problem_records, saved_records  # noqa: E402
from lmgym.evaluation.evaluate import sampled_metrics  # noqa: E402
from lmgym.evaluation.rag_evaluate import mean_metrics  # noqa: E402
from lmgym.evaluation.reflection_critic_metrics import critic_rates, record_critic_turns  # noqa: E402
from lmgym.evaluation.reflection_metrics import reflection_metrics, turn_metrics  # noqa: E402
from lmgym.evaluation.search_eval import search_metrics  # noqa: E402
from lmgym.evaluation.verifier_eval import verifier_problem_metrics, verifier_solution_metrics  # noqa: E402

# aggregate files that carry headline numbers (RESULTS.md's): listed when no records file stands beside them
AGGREGATE_NAMES = ("eval.json", "*.eval.json", "*_eval.json", "verifier_eval.json", "reflection.json",
                   "rag_agent.json", "pipeline.json", "search_*.json", "level*.json", "curves.json",
                   "curves/*.json")
SUMMARIES = ("reflection.json", "rag_agent.json", "pipeline.json")  # tables of rows, each row's records in its folder
TOLERANCE = 1e-9

Row = tuple[str, str, str, float | None, Any]  # (file, group, metric, recomputed, aggregate)


def recompute_sampled(records: Sequence[Mapping]) -> dict[str, dict[str, float | None]]:
    return {"": sampled_metrics(records, int(records[0].get("k", 1)))}


def recompute_rag(records: Sequence[Mapping]) -> dict[str, dict[str, float | None]]:
    return {"": mean_metrics(records)}


def recompute_reflection(records: Sequence[Mapping]) -> dict[str, dict[str, float | None]]:
    turns = int(records[0]["turns"])
    critic = [turn for r in records for turn in record_critic_turns(r)] if turns >= 2 else []
    return {"": {**reflection_metrics(records, turns), **turn_metrics(records, turns),
                 **(critic_rates(critic) if critic else {})}}


def recompute_verifier(records: Sequence[Mapping]) -> dict[str, dict[str, float | None]]:
    groups: dict[str, list[Mapping]] = {}
    for r in records:
        groups.setdefault(f"{r['verifier']}/{r['level']}", []).append(r)
    return {name: {**verifier_solution_metrics(rows), **verifier_problem_metrics(rows)}
            for name, rows in groups.items()}


def recompute_pipeline(records: Sequence[Mapping]) -> dict[str, dict[str, float | None]]:
    suites: dict[str, list[Mapping]] = {}
    for r in records:
        suites.setdefault(str(r["suite"]), []).append(r)
    return {f"{suite}/{method}": metrics for suite, rows in suites.items()
            for method, metrics in search_metrics(rows).items()}


RECOMPUTE: dict[str, Callable[[Sequence[Mapping]], dict[str, dict[str, float | None]]]] = {
    "sampled": recompute_sampled, "rag": recompute_rag, "reflection": recompute_reflection,
    "verifier": recompute_verifier, "search": search_metrics, "search_curves": search_metrics,
    "pipeline": recompute_pipeline}


def stored_aggregates(kind: str, data: Any, group: str) -> Mapping[str, Any]:
    """The aggregate numbers of `group` in an aggregate file's JSON (`data`), as each kind's writer saves them."""
    if not isinstance(data, Mapping):
        return {}
    if kind == "verifier":
        verifier, level = group.split("/", 1)
        return data.get("verifiers", {}).get(verifier, {}).get(level, {})
    if kind == "rag":  # examples/pipeline_table.py save_row: {"settings": ..., "row": {"metrics": ...}}
        return data.get("row", {}).get("metrics", {})
    if kind == "pipeline":  # save_row: {"settings": ..., "row": {"method": ..., "results": {suite: {...}}}}
        return data.get("row", {}).get("results", {}).get(group.split("/", 1)[0], {})
    if kind in ("search", "search_curves"):  # search_eval.save_table, curves.save_curves: {"about", "rows"}
        # a group is a method ("maj@8"), or a method at a budget ("maj/96") when the runs name budgets (curves; the
        # pooled curves saved before 2026-12-01 carry kind "search")
        rows = [row for row in data.get("rows", []) if isinstance(row, Mapping)]
        method, _, budget = group.rpartition("/")
        return next((row for row in rows if row.get("method") == group), None) or next(
            (row for row in rows if row.get("method") == method and str(row.get("budget")) == budget), {})
    return data


def recompute_file(path: Path) -> list[Row]:
    """The rows of one records file: every recomputed metric beside its aggregate (None when not stored)."""
    records = read_problem_records(path)
    kinds = {r["kind"] for r in records}
    if len(kinds) != 1 or next(iter(kinds)) not in RECOMPUTE:
        raise ValueError(f"{path}: records of kind(s) {', '.join(sorted(map(str, kinds)))}; report.py knows "
                         f"one kind a file: {', '.join(RECOMPUTE)}")
    kind = records[0]["kind"]
    aggregate = aggregate_of(path)
    data = json.loads(aggregate.read_text()) if aggregate.is_file() else None
    rows = []
    for group, metrics in RECOMPUTE[kind](records).items():
        stored = stored_aggregates(kind, data, group)
        rows += [(str(path), group or kind, name, value, stored.get(name)) for name, value in metrics.items()]
    return rows


def agrees(recomputed: float | None, stored: Any) -> bool | None:
    """True or False when the aggregate holds the metric, None when it does not."""
    if stored is None and recomputed is None:
        return True
    if stored is None or recomputed is None:
        return None if stored is None else False
    return math.isclose(float(recomputed), float(stored), rel_tol=TOLERANCE, abs_tol=TOLERANCE)


def has_records(aggregate: Path) -> bool:
    """A records file beside `aggregate`, or for a summary table (SUMMARIES) one in its rows' folders below."""
    if saved_records(aggregate) is not None:
        return True
    return aggregate.name in SUMMARIES and bool(records_under(aggregate.parent))


def records_under(folder: Path) -> list[Path]:
    """Every records file under `folder`, plain or gzipped (a file kept both ways is read once, plain)."""
    plain = set(folder.rglob("*" + SUFFIX))
    packed = {p for p in folder.rglob("*" + GZIP_SUFFIX) if p.with_name(p.name.removesuffix(".gz")) not in plain}
    return sorted(plain | packed)


def aggregates_only(folder: Path) -> list[Path]:
    """Aggregate files of headline numbers under `folder` with no records file beside them."""
    found = {p for pattern in AGGREGATE_NAMES for p in folder.rglob(pattern) if p.is_file()}
    return sorted(p for p in found if not has_records(p))


def fmt(value: Any) -> str:
    return "-" if value is None else f"{float(value):.4f}"


def report(folder: Path) -> tuple[str, bool]:
    """(the printed report, whether every recomputed number equals its aggregate)."""
    files = records_under(folder)
    lines = [f"# {folder}: {len(files)} per-problem record file(s)", "",
             "| records | group | metric | recomputed | aggregate | equal |", "|---|---|---|---:|---:|---|"]
    ok = True
    for path in files:
        for name, group, metric, value, stored in recompute_file(path):
            same = agrees(value, stored)
            ok &= same is not False
            lines.append(f"| {Path(name).relative_to(folder)} | {group} | {metric} | {fmt(value)} | {fmt(stored)} | "
                         f"{ {True: 'yes', False: 'NO', None: '-'}[same] } |")
    missing = aggregates_only(folder)
    if missing:
        lines += ["", f"{len(missing)} aggregate file(s) without per-problem records "
                      "(aggregates only: rerun to recompute):"]
        lines += [f"- {p.relative_to(folder)}: aggregates only: rerun to recompute" for p in missing]
    return "\n".join(lines) + "\n", ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("folder", type=Path, help="a results folder (searched recursively)")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.error(f"{args.folder}: not a folder")
    try:
        text, ok = report(args.folder)
    except ValueError as err:  # a malformed records file: one line naming it
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(text, end="")
    if not ok:
        print("some recomputed numbers differ from their aggregates (NO above)", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
