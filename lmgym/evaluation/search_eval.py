"""Search methods side by side: accuracy, tokens sampled per problem (and those a generative verifier wrote)
and throughput on the same problems, as rows and as a markdown table (`evaluation/evaluate.py` is the plain
greedy / pass@k evaluation)."""
from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from lmgym.core.problem_records import write_problem_records
from lmgym.evaluation.evaluate import episode_starts
from lmgym.evaluation.search_comparison import vs_cell, vs_title, with_intervals
from lmgym.evaluation.verifier_metrics import auc_interval, roc_auc
from lmgym.search.methods import search_method
from lmgym.search.search import named_scorer, run_search
from lmgym.search.search_types import SearchResult, StepScorer
from lmgym.search.settings import SearchSettings
from lmgym.training.progress import phase_bar

COLUMNS = (("method", "method"), ("accuracy", "accuracy"), ("tokens_per_problem", "tokens/problem"),
           ("problems", "problems"), ("seconds", "seconds"), ("tokens_per_second", "tokens/s"))
VERIFIER_TOKENS, VERIFIER_TOKENS_TITLE = "verifier_tokens_per_problem", "verifier tokens/problem"
TREE_KEYS = ("nodes", "finished_leaves", "finished_right")  # kept in a tree search's problem records


def evaluate_search(policy, env, methods: Sequence[SearchSettings], scorer: StepScorer | None = None,
                    episodes: int = 256, offset: int = 0, batch_problems: int = 64, seed: int = 0,
                    progress: bool = False, records_path: str | os.PathLike | None = None,
                    baseline: str | None = None) -> list[dict]:
    """Run each method on the same problems (`episodes` of them from problem `offset`, as `episode_starts`
    picks them), `batch_problems` problems searched together, each method's sampling seeded by `seed`.

    Returns one row per method: {method (its label), accuracy, tokens_per_problem (every token sampled,
    discarded candidates included), problems, seconds (wall clock), tokens_per_second}, and
    verifier_tokens_per_problem (tokens the method's scorer generated, per problem) where that scorer counts
    them in an int `tokens_generated` (a generative verifier: `CriticVerifier`); a method that scores its
    samples adds the scorer's AUC on them (`sample_auc`). With `records_path`
    (the aggregate's `.json` path, or a `.problems.jsonl` one) each problem's `search_records` entry is
    written there (lmgym.core.problem_records), kind "search". With `baseline` (a method's label, e.g.
    "maj@8") every other row gains `vs`: the paired bootstrap 95% interval of its accuracy minus the baseline's
    over the same problems (evaluation/search_comparison.py)."""
    methods = list(methods)
    if baseline is not None and baseline not in [s.label for s in methods if isinstance(s, SearchSettings)]:
        raise ValueError(f"evaluate_search: baseline {baseline!r} is not one of the methods' labels")
    rows, records = search_outcomes(policy, env, methods, scorer, episodes, offset, batch_problems, seed, progress)
    if records_path is not None:
        write_problem_records(records_path, "search", records)
    return with_intervals(rows, records, baseline, seed=seed) if baseline is not None else rows


def search_outcomes(policy, env, methods: Sequence[SearchSettings], scorer: StepScorer | None = None,
                    episodes: int = 256, offset: int = 0, batch_problems: int = 64, seed: int = 0,
                    progress: bool = False) -> tuple[list[dict], list[dict]]:
    """`evaluate_search`'s rows and its per-problem records: one per problem, in order, with its `index`
    (problem index, or seed), `id`, `gold` and `runs`: each method's {method, answer, correct, tokens}, in
    the methods' order. Each row's accuracy and tokens are `run_metrics` of its runs."""
    methods = check_methods(methods, scorer)
    starts = problem_starts(env, episodes, offset, batch_problems, "evaluate_search")
    rows, outcomes = [], []
    for settings in methods:
        row, results = _evaluate_one(policy, env, settings, scorer, starts, batch_problems, seed, progress)
        rows.append(row)
        outcomes.append(results)
    records = [{**problem_identity(env, start, [results[i] for results in outcomes]),
                "runs": [run_outcome(settings.label, results[i]) for settings, results in zip(methods, outcomes)]}
               for i, start in enumerate(starts)]
    return rows, records


def check_methods(methods: Sequence[SearchSettings], scorer: StepScorer | None, caller: str = "evaluate_search"
                  ) -> list[SearchSettings]:
    """`methods` as a list, after checking that there is one, that each is a SearchSettings and that each method
    needing a step scorer has one; a bad one is a one-line error naming `caller`."""
    methods = list(methods)
    if not methods:
        raise ValueError(f"{caller}: methods is empty; give at least one SearchSettings")
    for settings in methods:
        if not isinstance(settings, SearchSettings):
            raise TypeError(f"{caller}: methods must be SearchSettings, got {type(settings).__name__}")
        if search_method(settings.method).needs_scorer and scorer is None:
            raise ValueError(f"{caller}: method {settings.label} needs a step scorer (e.g. a PRM: --prm)")
    return methods


def problem_starts(env, episodes: int, offset: int, batch_problems: int, caller: str) -> list[dict]:
    """The resets of `episodes` problems from `offset` (`episode_starts`), after checking the three counts; a bad
    one is a one-line ValueError naming `caller`."""
    for name, value, least in (("episodes", episodes, 1), ("offset", offset, 0), ("batch_problems", batch_problems, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{caller}: {name} must be an integer >= {least}, got {value!r}")
    everything = episode_starts(env, offset + episodes)
    if offset >= len(everything):
        raise ValueError(f"{caller}: offset {offset} is past the last problem (the env has {len(everything)})")
    return everything[offset:]


def problem_identity(env, start: Mapping[str, Any], results: Sequence[SearchResult]) -> dict[str, Any]:
    """A problem's `index` (problem index, or seed), `id` and `gold`: from the env's problem where the start
    names its index, else from a search's chosen episode (None when no method found one)."""
    options = start.get("options") or {}
    if "index" in options:
        problem = getattr(env, "unwrapped", env).get_problem(options["index"])
        return {"index": options["index"], "id": problem.problem_id, "gold": problem.gold}
    chosen = next((r.trajectory for r in results if r.trajectory is not None), None)
    return {"index": start.get("seed"), "id": chosen.outcome.problem_id if chosen is not None else None,
            "gold": chosen.info.get("gold") if chosen is not None else None}


def run_outcome(method: str, result: SearchResult) -> dict[str, Any]:
    """One method's part of a problem record: its label, parsed answer, the env's verdict and tokens sampled;
    for a method that scored its samples (best_of_n, weighted_maj), every sample's score and verdict too; for a
    tree search (mcts), its nodes, finished leaves and right finished leaves."""
    out = {"method": method, "answer": result.answer, "correct": bool(result.correct), "tokens": int(result.tokens)}
    for key in TREE_KEYS:  # a tree search's size, and how many of its finished leaves were right
        if key in result.details:
            out[key] = int(result.details[key])
    if "scores" in result.details and "sample_correct" in result.details:
        out["sample_scores"] = [float(x) for x in result.details["scores"]]
        out["sample_correct"] = [bool(x) for x in result.details["sample_correct"]]
    return out


def sample_auc(runs: Sequence[Mapping[str, Any]]) -> dict[str, float] | None:
    """The verifier's ROC AUC on a scored method's own samples (each run's `sample_scores` against its
    `sample_correct`), with its 95% bootstrap interval over problems and the counts it rests on: {sample_auc,
    sample_auc_low, sample_auc_high, samples_scored, samples_right}; None when the runs hold no scores or one
    label only. These are the samples search ranks, so this AUC says how much the scorer can help it."""
    scored = [r for r in runs if "sample_scores" in r]
    if not scored:
        return None
    scores, labels = [r["sample_scores"] for r in scored], [r["sample_correct"] for r in scored]
    auc = roc_auc([x for row in scores for x in row], [y for row in labels for y in row])
    if auc is None:
        return None
    out = {"sample_auc": auc, "samples_scored": sum(map(len, scores)), "samples_right": sum(map(sum, labels))}
    interval = auc_interval(scores, labels)
    if interval is not None:
        out["sample_auc_low"], out["sample_auc_high"] = interval
    return out


def sample_auc_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown of the rows that carry `sample_auc`: the scorer's AUC on the method's own samples, its
    interval, and the samples (right ones) it rests on; "" when no row has it."""
    own = [r for r in rows if "sample_auc" in r]
    if not own:
        return ""
    lines = ["| method | verifier AUC on its samples [95% CI] | samples (right) |", "|---|---|---|"]
    for r in own:
        interval = (f" [{r['sample_auc_low']:.3f}, {r['sample_auc_high']:.3f}]" if "sample_auc_low" in r else "")
        lines.append(f"| {r['method']} | {r['sample_auc']:.3f}{interval} | {r['samples_scored']} "
                     f"({r['samples_right']}) |")
    return "\n".join(lines) + "\n"


def run_metrics(runs: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """accuracy, tokens_per_problem and problems of one method's runs (one per problem)."""
    if not runs:
        raise ValueError("run_metrics: no runs")
    return {"accuracy": sum(bool(r["correct"]) for r in runs) / len(runs),
            "tokens_per_problem": sum(r["tokens"] for r in runs) / len(runs), "problems": len(runs)}


def search_metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """The headline numbers of `evaluate_search` (or `evaluate_curves`) recomputed from its per-problem
    records: `run_metrics` of each method's runs, keyed by the method ("<method>/<budget>" for runs that
    name a budget), in first-seen order."""
    if not records:
        raise ValueError("search_metrics: no problem records")
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        for run in record["runs"]:
            key = run["method"] if "budget" not in run else f"{run['method']}/{run['budget']}"
            groups.setdefault(key, []).append(run)
    return {key: run_metrics(runs) for key, runs in groups.items()}


def _evaluate_one(policy, env, settings, scorer, starts, batch_problems, seed, progress
                  ) -> tuple[dict, list[SearchResult]]:
    generator = torch.Generator(device=getattr(policy, "device", "cpu")).manual_seed(seed)
    counter = named_scorer(scorer, settings)
    before = verifier_tokens(counter)
    bar = phase_bar(settings.label, len(starts), "problem", progress)
    results, clock = [], time.perf_counter()
    for first in range(0, len(starts), batch_problems):
        results += run_search(policy, env, starts[first:first + batch_problems], settings, scorer, generator)
        bar.update(min(batch_problems, len(starts) - first))
    seconds = time.perf_counter() - clock
    bar.close()
    runs = [run_outcome(settings.label, r) for r in results]
    metrics = run_metrics(runs)
    tokens = sum(r.tokens for r in results)
    row = {"method": settings.label, **metrics, "seconds": seconds,
           "tokens_per_second": tokens / seconds if seconds > 0 else 0.0}
    if before is not None:
        row[VERIFIER_TOKENS] = (verifier_tokens(counter) - before) / metrics["problems"]
    row.update(sample_auc(runs) or {})
    return row, results


def verifier_tokens(scorer) -> int | None:
    """The tokens `scorer` has generated so far (its int `tokens_generated`), or None when it keeps no count."""
    count = getattr(scorer, "tokens_generated", None)
    return count if isinstance(count, int) and not isinstance(count, bool) else None


def verifier_tokens_cells(rows: Sequence[Mapping[str, Any]]) -> list[str] | None:
    """Each row's verifier tokens per problem as table text ("-" where it has none), or None when no row has
    them (the tables then leave the column out)."""
    if not any(VERIFIER_TOKENS in row for row in rows):
        return None
    return [f"{row[VERIFIER_TOKENS]:.1f}" if VERIFIER_TOKENS in row else "-" for row in rows]


def markdown_table(rows: Sequence[dict]) -> str:
    """The rows of `evaluate_search` as a markdown table (accuracy in %, one decimal); with "verifier
    tokens/problem" after "tokens/problem" when a row has it, and a last column of each row's interval against
    the baseline when the rows have one (`evaluate_search(baseline=...)`)."""
    extra, verifier = vs_title(rows), verifier_tokens_cells(rows)
    titles = [title for _, title in COLUMNS] + ([extra] if extra else [])
    if verifier is not None:
        titles.insert(3, VERIFIER_TOKENS_TITLE)
    lines = ["| " + " | ".join(titles) + " |", "|" + "---|" * len(titles)]
    for i, row in enumerate(rows):
        cells = [str(row["method"]), f"{100 * row['accuracy']:.1f}%", f"{row['tokens_per_problem']:.1f}",
                 str(row["problems"]), f"{row['seconds']:.1f}", f"{row['tokens_per_second']:.0f}"]
        if verifier is not None:
            cells.insert(3, verifier[i])
        lines.append("| " + " | ".join(cells + ([vs_cell(row)] if extra else [])) + " |")
    return "\n".join(lines) + "\n"


def save_table(rows: Sequence[dict], stem: str | Path, about: dict | None = None) -> tuple[Path, Path]:
    """Write `<stem>.md` (the markdown table) and `<stem>.json` (the rows, with `about`: the command's
    settings); returns both paths."""
    return write_table(markdown_table(rows), rows, stem, about)


def write_table(table: str, rows: Sequence[dict], stem: str | Path, about: dict | None = None) -> tuple[Path, Path]:
    """Write `<stem>.md` (`table`) and `<stem>.json` (`rows`, with `about`), making `stem`'s folder; returns
    both paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    markdown, data = stem.with_suffix(".md"), stem.with_suffix(".json")
    markdown.write_text(table)
    data.write_text(json.dumps({"about": dict(about or {}), "rows": list(rows)}, indent=2) + "\n")
    return markdown, data
