"""examples/verifier_loop.py's tables: held-out verifier reports (`lmgym.evaluation.verifier_eval.VerifierReport`) as
plain records for JSON files, and as markdown: one row per (verifier, problem set), the reliability table of each,
and the better verifier; and methods compared at one method's budget (`versus_line`).

A record is `report.as_dict()` with the solution-level reliability table under "reliability" (a list of
{lower, upper, count, mean_score, positive_rate}): what a result file keeps and a summary reads back.

"At maj@8's budget: weighted maj@8 / best-of-8 vs maj@8": the headline table's rows choose among one pool of n
samples a problem (`evaluate_reranking`; they differ only in how one answer is chosen), so they spend the same
policy tokens: the comparison is at equal tokens by construction, and the line states the tokens of each. A
generative verifier's own tokens are not in that count: `equal_tokens_lines` compares its rows with maj at the
tokens both wrote.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from lmgym.core.problem_records import read_problem_records, saved_records
from lmgym.evaluation.search_eval import VERIFIER_TOKENS
from lmgym.evaluation.statistics import interval_text, paired_bootstrap
from lmgym.evaluation.verifier_eval import VerifierReport

COLUMNS = (("samples", "samples", "{:.0f}"), ("positive_rate", "correct", "{:.1%}"),
           ("accuracy", "accuracy", "{:.1%}"), ("auc", "AUC", "{:.3f}"),
           ("within_problem_auc", "AUC within problems", "{:.3f}"), ("ece", "ECE", "{:.3f}"))
PROBLEM_COLUMNS = (("majority_accuracy", "maj@N", "{:.1%}"), ("weighted_majority_accuracy", "weighted maj@N", "{:.1%}"),
                   ("best_of_n_accuracy", "best-of-N", "{:.1%}"), ("sample_accuracy", "sample accuracy", "{:.1%}"),
                   ("pass_at_n", "pass@N", "{:.1%}"))


def report_record(report: VerifierReport) -> dict:
    """The report's scalar metrics (`as_dict`) and its solution-level reliability table, JSON-ready."""
    return {**report.as_dict(), "reliability": [dataclasses.asdict(b) for b in report.solution.reliability]}


def _cell(record: Mapping, key: str, form: str) -> str:
    value = record.get(key)
    return "-" if value is None else form.format(value)


def verifier_table(records: Mapping[str, Mapping]) -> str:
    """Markdown: one row per named record (e.g. "orm, L2"): solution-level samples, share correct, accuracy at
    0.5, AUC (with its 95% interval over problems when the record has one), the AUC within problems (over
    right-wrong pairs of one problem's samples: what a choice among them needs), ECE, then per problem over the same
    N samples: maj@N, the weighted maj@N and best-of-N its scores give, the samples' accuracy and pass@N ("-":
    not in the record)."""
    titles = [t for _, t, _ in COLUMNS + PROBLEM_COLUMNS]
    lines = ["| verifier | " + " | ".join(titles) + " |", "|" + "---|" * (len(titles) + 1)]
    for name, record in records.items():
        solution = {key: record.get(f"solution_{key}") for key, _, _ in COLUMNS}
        solution["samples"] = record.get("solution_count")
        cells = [_cell(solution, key, form) for key, _, form in COLUMNS]
        if record.get("solution_auc_low") is not None:  # the AUC's 95% interval over problems
            cells[[k for k, _, _ in COLUMNS].index("auc")] += (f" [{record['solution_auc_low']:.2f}, "
                                                              f"{record['solution_auc_high']:.2f}]")
        cells += [_cell(record, key, form) for key, _, form in PROBLEM_COLUMNS]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def reliability_markdown(record: Mapping) -> str:
    """Markdown of a record's reliability table: score bin, solutions in it, mean score, share correct."""
    lines = ["| score bin | solutions | mean score | correct |", "|---|---|---|---|"]
    for b in record["reliability"]:
        lines.append(f"| [{b['lower']:.1f}, {b['upper']:.1f}) | {b['count']} | {b['mean_score']:.3f} | "
                     f"{b['positive_rate']:.1%} |")
    return "\n".join(lines) + "\n"


def better_verifier(records: Mapping[str, Sequence[Mapping]]) -> str:
    """The verifier whose records (one per problem set) have the highest mean solution AUC; a record without
    an AUC (one class only) counts 0.5, a chance ranking; ties go to the first named."""
    if not records:
        raise ValueError("better_verifier: no verifiers to compare")
    means = {}
    for name, rows in records.items():
        if not rows:
            raise ValueError(f"better_verifier: verifier {name!r} has no records")
        aucs = [r.get("solution_auc") for r in rows]
        means[name] = sum(0.5 if a is None else a for a in aucs) / len(aucs)
    return max(means, key=lambda name: means[name])  # max keeps the first of equal values


def _row(rows: Sequence[dict], method: str) -> dict:
    for row in rows:
        if row["method"] == method:
            return row
    raise ValueError(f"budget comparison: no row for {method!r} (rows: {', '.join(r['method'] for r in rows)})")


def versus_line(rows: Sequence[dict], base: str, others: Sequence[str]) -> str:
    """One line: each of `others` (accuracy, points over `base`, tokens/problem) against `base`, from rows of
    `evaluate_search` (method, accuracy, tokens_per_problem)."""
    reference = _row(rows, base)
    parts = []
    for name in others:
        row = _row(rows, name)
        points = 100 * (row["accuracy"] - reference["accuracy"])
        parts.append(f"{name} {100 * row['accuracy']:.1f}% ({points:+.1f} points, {row['tokens_per_problem']:.1f} "
                     f"tokens/problem)")
    return (f"at {base}'s budget ({reference['tokens_per_problem']:.1f} tokens/problem): " + ", ".join(parts)
            + f" vs {base} {100 * reference['accuracy']:.1f}%")


def read_curves(folder: Path, level: int) -> tuple[list[dict], list[dict]] | None:
    """The capped curves of a level and their per-problem records: curves/L<level>.json, or merged from the
    parts that one process a method wrote (curves/L<level>_part_<methods>.json: rows in file order, each
    problem's runs joined); None when there are neither."""
    whole = folder / f"L{level}.json"
    files = [whole] if whole.is_file() else sorted(folder.glob(f"L{level}_part_*.json"))
    if not files:
        return None
    rows: list[dict] = []
    by_problem: dict = {}
    for file in files:
        rows += json.loads(file.read_text())["rows"]
        records = saved_records(file)
        for record in read_problem_records(records) if records else []:
            joined = by_problem.setdefault(record["index"], {**record, "runs": []})
            joined["runs"] += record["runs"]
    return rows, list(by_problem.values())


def within_budget(at_rows: Sequence[dict], rows: Sequence[dict], base: str, method: str) -> dict | None:
    """`method`'s capped row at the largest budget whose tokens/problem stay within `base`'s (an uncapped row), or
    None when it has none."""
    reference = _row(at_rows, base)
    within = [r for r in rows if r["method"] == method and r["tokens_per_problem"] <= reference["tokens_per_problem"]]
    return max(within, key=lambda r: r["budget"]) if within else None


def within_reach_line(at_rows: Sequence[dict], at_records: Sequence[dict], rows: Sequence[dict],
                      records: Sequence[dict], base: str, method: str = "mcts") -> str | None:
    """Where a right answer was within reach: on how many problems `base`'s pool of samples (the records'
    `samples`) held a right one and how often `base` chose right; and the same for `method`'s trees at the budget
    `matched_budget_line` compares (right finished leaves, with the trees' mean size). What bounds a choice rule
    is what its samples hold. None when neither side's records carry it."""
    parts = []
    pools = [(rec["samples"]["correct"], run["correct"]) for rec in at_records if "samples" in rec
             for run in rec["runs"] if run["method"] == base]
    if pools:
        held = [chose for correct, chose in pools if any(correct)]
        parts.append(f"{base}'s samples held a right answer on {len(held)} of {len(pools)} problems "
                     f"({len(held) / len(pools):.1%}) and it chose one on {sum(held)} of them")
    chosen = within_budget(at_rows, rows, base, method)
    trees = [] if chosen is None else [run for rec in records for run in rec["runs"] if run["method"] == method
                                       and run.get("budget") == chosen["budget"] and "finished_right" in run]
    if trees:
        held = [run["correct"] for run in trees if run["finished_right"] > 0]
        leaves = sum(run["finished_leaves"] for run in trees) / len(trees)
        nodes = sum(run["nodes"] for run in trees) / len(trees)
        parts.append(f"{method} at budget {chosen['budget']} held a right finished leaf on {len(held)} of "
                     f"{len(trees)} ({len(held) / len(trees):.1%}; {leaves:.1f} finished leaves and {nodes:.1f} "
                     f"nodes a tree) and chose one on {sum(held)} of them")
    return ("Within reach: " + "; ".join(parts) + ".") if parts else None


def matched_budget_line(at_rows: Sequence[dict], at_records: Sequence[dict], rows: Sequence[dict],
                        records: Sequence[dict], base: str, method: str = "mcts", seed: int = 0) -> str | None:
    """`method`'s capped run at the largest budget whose tokens/problem stay within `base`'s (an uncapped row,
    e.g. maj@8), against `base` on the same problems: accuracies, tokens and the paired bootstrap interval of
    the difference. None when the method has no such run or the records are missing."""
    reference, chosen = _row(at_rows, base), within_budget(at_rows, rows, base, method)
    if chosen is None:
        return None
    base_by = {rec["index"]: run["correct"] for rec in at_records for run in rec["runs"] if run["method"] == base}
    own_by = {rec["index"]: run["correct"] for rec in records for run in rec["runs"]
              if run["method"] == method and run.get("budget") == chosen["budget"]}
    shared = [i for i in own_by if i in base_by]
    if len(shared) < 2:
        return None
    diff = paired_bootstrap([float(own_by[i]) for i in shared], [float(base_by[i]) for i in shared], seed=seed)
    checks = f", and {chosen[VERIFIER_TOKENS]:.1f} the verifier generated" if VERIFIER_TOKENS in chosen else ""
    return (f"{method} at <= {base}'s tokens (budget {chosen['budget']}, {chosen['tokens_per_problem']:.1f} "
            f"tokens/problem{checks}): {100 * chosen['accuracy']:.1f}% vs {base} {100 * reference['accuracy']:.1f}% "
            f"({reference['tokens_per_problem']:.1f} tokens/problem) on {len(shared)} problems; difference "
            f"{interval_text(diff.difference, diff.low, diff.high)} points (paired bootstrap 95%)")


def equal_tokens_lines(at_rows: Sequence[dict], at_records: Sequence[dict], rows: Sequence[dict],
                       records: Sequence[dict], base: str = "maj", seed: int = 0) -> list[str]:
    """Each uncapped row whose scorer generated tokens (`verifier_tokens_per_problem`: the critic's checks)
    against `base`'s capped run at the smallest budget whose tokens/problem reach the policy's and the
    verifier's tokens together (the largest budget when none does; the line gives both token counts), on the
    same problems: accuracies and the paired bootstrap interval of the difference. [] when no row generated
    tokens or the records are missing."""
    own_rows = [r for r in at_rows if VERIFIER_TOKENS in r]
    capped = sorted((r for r in rows if r["method"] == base), key=lambda r: r["budget"])
    if not own_rows or not capped or not at_records or not records:
        return []
    lines = []
    for row in own_rows:
        generated = row["tokens_per_problem"] + row[VERIFIER_TOKENS]
        chosen = next((r for r in capped if r["tokens_per_problem"] >= generated), capped[-1])
        base_by = {rec["index"]: run["correct"] for rec in records for run in rec["runs"]
                   if run["method"] == base and run.get("budget") == chosen["budget"]}
        own_by = {rec["index"]: run["correct"] for rec in at_records for run in rec["runs"]
                  if run["method"] == row["method"]}
        shared = [i for i in own_by if i in base_by]
        if len(shared) < 2:
            continue
        diff = paired_bootstrap([float(own_by[i]) for i in shared], [float(base_by[i]) for i in shared], seed=seed)
        lines.append(f"{row['method']} at equal generated tokens ({generated:.1f} a problem: "
                     f"{row['tokens_per_problem']:.1f} the policy's, {row[VERIFIER_TOKENS]:.1f} the verifier's): "
                     f"{100 * row['accuracy']:.1f}% vs {base} capped at {chosen['budget']} "
                     f"({chosen['tokens_per_problem']:.1f} tokens/problem) {100 * chosen['accuracy']:.1f}% on "
                     f"{len(shared)} problems; difference {interval_text(diff.difference, diff.low, diff.high)} "
                     f"points (paired bootstrap 95%)")
    return lines


def auc_text(auc: float | None) -> str:
    """An AUC with three decimals; "-" for None (one label only)."""
    return "-" if auc is None else f"{auc:.3f}"


def balance_table(balance: Mapping[str, Mapping]) -> str:
    """Markdown of labels/balance.json: each train level's right share, samples and problems with a right
    sample, before and after balancing, pooled and per source (policy, second); and how well the source alone
    predicts the label before and after (AUC; 0.5: not at all)."""
    lines = ["| level | source | samples | right | right share | problems with a right sample | kept | "
             "kept right share | source's AUC, before -> after |",
             "|---|---|---|---|---|---|---|---|---|"]
    for level, b in balance.items():
        auc = b.get("source_auc")
        pooled = ("all" + (f" ({b['mode']})" if "mode" in b else ""), b,
                  f"{auc_text(auc['before'])} -> {auc_text(auc['after'])}" if auc else "")
        for source, counts, auc_cell in [pooled] + [(name, c, "") for name, c in b.get("sources", {}).items()]:
            before, after = counts["before"], counts["after"]
            lines.append(f"| {level} | {source} | {before['samples']} | {before['right']} | "
                         f"{before['right_share']:.1%} | {before['problems_with_right']} of {before['problems']} | "
                         f"{after['samples']} | {after['right_share']:.1%} | {auc_cell} |")
    return "\n".join(lines) + "\n"
