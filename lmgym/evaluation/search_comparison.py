"""Search methods against a baseline, problem by problem: the paired bootstrap interval (evaluation/statistics.py)
of each method's accuracy minus the baseline's over the same problems, from `search_outcomes` records.

In a table of `evaluate_search` the baseline is a method's label ("maj@8"); on `evaluate_curves`' curves it is a
curve name ("maj"), and each (method, budget) is compared with the baseline at the same budget. Each row gains
`vs`: {baseline, difference, low, high, confidence}; the baseline's own rows gain nothing.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lmgym.evaluation.statistics import PairedDifference, interval_text, paired_bootstrap


def _key(run: Mapping[str, Any]) -> tuple[str, Any]:
    return run["method"], run.get("budget")


def per_problem_correct(records: Sequence[Mapping[str, Any]]) -> dict[tuple[str, Any], list[float]]:
    """(method, budget or None) -> each problem's 0/1 verdict, in the records' problem order."""
    out: dict[tuple[str, Any], list[float]] = {}
    for record in records:
        for run in record["runs"]:
            out.setdefault(_key(run), []).append(float(bool(run["correct"])))
    return out


def versus_baseline(records: Sequence[Mapping[str, Any]], baseline: str, n_resamples: int = 10_000,
                    seed: int = 0) -> dict[tuple[str, Any], PairedDifference]:
    """(method, budget) -> the paired interval of its accuracy minus `baseline`'s at the same budget, for every
    method of the records but the baseline; a one-line ValueError when the baseline is not among them."""
    scores = per_problem_correct(records)
    if not any(method == baseline for method, _ in scores):
        names = ", ".join(dict.fromkeys(method for method, _ in scores))
        raise ValueError(f"baseline {baseline!r} is not one of the compared methods ({names})")
    out = {}
    for (method, budget), own in scores.items():
        if method == baseline:
            continue
        base = scores.get((baseline, budget))
        if base is None or len(own) < 2:
            continue  # no baseline at this budget, or one problem: nothing to compare
        out[(method, budget)] = paired_bootstrap(own, base, n_resamples=n_resamples, seed=seed)
    return out


def with_intervals(rows: Sequence[dict], records: Sequence[Mapping[str, Any]], baseline: str,
                   n_resamples: int = 10_000, seed: int = 0) -> list[dict]:
    """`rows` (evaluate_search's or evaluate_curves') with `vs` added to each row that has a comparison."""
    compared = versus_baseline(records, baseline, n_resamples, seed)
    out = []
    for row in rows:
        found = compared.get((row["method"], row.get("budget")))
        out.append(dict(row) if found is None else {**row, "vs": {
            "baseline": baseline, "difference": found.difference, "low": found.low, "high": found.high,
            "confidence": found.confidence}})
    return out


def vs_title(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The column title of the rows' comparisons ("vs maj@8, points [95% CI]"), or None when no row has one."""
    for row in rows:
        if "vs" in row:
            vs = row["vs"]
            return f"vs {vs['baseline']}, points [{vs['confidence']:.0%} CI]"
    return None


def vs_cell(row: Mapping[str, Any]) -> str:
    """A row's comparison as table text ("+2.9 [+0.8, +5.1]"), or "-" (the baseline itself)."""
    vs = row.get("vs")
    return "-" if vs is None else interval_text(vs["difference"], vs["low"], vs["high"])
