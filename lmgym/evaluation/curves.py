"""Accuracy against tokens per problem at equal budgets: every method run at every budget, each run capped
hard at the budget's sampled tokens per problem (`SearchSettings.max_tokens`, `search/token_budget.py`:
every sampled token counts, discarded candidates and verifier-rejected expansions included).

maj, weighted_maj and best_of_n sample rounds of `n` episodes until the cap, so they spend it exactly;
beam keeps its width and stops at the cap or when its beams have finished (then it spends less: the row
says so); mcts runs with simulations raised to SIMULATIONS_PER_TOKEN x the budget, so the cap, not the simulation
count, ends each tree: a new node costs at least one token, but a revisit of a finished leaf costs none and still
counts a simulation, and a value guide that rates a finished leaf highly spends most simulations revisiting it
(with simulations equal to the budget, a toy tree of such leaves stopped at 45 of 80 tokens:
tests/test_search_curves.py; on an H200 the trained PRM's trees stopped at 316 of 384, likely so). Rows: (method,
budget, accuracy, tokens/problem); the plot draws one line per method.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from lmgym.core.problem_records import write_problem_records
from lmgym.evaluation.curve_progress import finished_runs, partial_path, run_key, save_run
from lmgym.evaluation.search_comparison import vs_cell, vs_title, with_intervals
from lmgym.evaluation.search_eval import (
    VERIFIER_TOKENS_TITLE,
    check_methods,
    search_outcomes,
    verifier_tokens_cells,
    write_table,
)
from lmgym.search.search_types import StepScorer
from lmgym.search.settings import SearchSettings
from lmgym.training.plots import save_line_plot

COLUMNS = (("method", "method"), ("budget", "budget (tokens/problem)"), ("accuracy", "accuracy"),
           ("tokens_per_problem", "tokens/problem"), ("problems", "problems"))


def curve_name(settings: SearchSettings) -> str:
    """A method's name on the curve: its label without the budget (maj, weighted_maj, best_of_n, beam_4x2, mcts)."""
    return dataclasses.replace(settings, max_tokens=1).label.rsplit("@", 1)[0]


SIMULATIONS_PER_TOKEN = 8  # a capped tree's simulations per budget token: room for revisits (module docstring)


def capped(settings: SearchSettings, budget: int) -> SearchSettings:
    """`settings` capped at `budget` sampled tokens per problem (mcts: simulations raised to SIMULATIONS_PER_TOKEN
    x the budget, so tokens, not revisits of finished leaves, end a tree)."""
    changes: dict = {"max_tokens": budget}
    if settings.method == "mcts":
        simulations = max(settings.mcts.simulations, SIMULATIONS_PER_TOKEN * budget)
        changes["mcts"] = dataclasses.replace(settings.mcts, simulations=simulations)
    return dataclasses.replace(settings, **changes)


def evaluate_curves(policy, env, methods: Sequence[SearchSettings], budgets: Sequence[int],
                    scorer: StepScorer | None = None, episodes: int = 256, offset: int = 0,
                    batch_problems: int = 64, seed: int = 0, progress: bool = False,
                    records_path: str | os.PathLike | None = None, baseline: str | None = None,
                    on_run: Callable[[dict, int, int, bool], None] | None = None) -> list[dict]:
    """Run every method at every budget on the same problems (as `evaluate_search` picks and seeds them).

    Returns one row per (method, budget), methods in the given order, budgets ascending: {method (its curve
    name), budget, accuracy, tokens_per_problem (mean tokens really sampled: the budget, or less where a
    method finished first), problems, seconds, tokens_per_second}, and verifier_tokens_per_problem where the
    method's scorer counts the tokens it generated (as `evaluate_search`'s rows). With `records_path` (the aggregate's
    `.json` path, or a `.problems.jsonl` one) each problem's record is written there (lmgym.core.problem_records),
    kind "search_curves": `search_outcomes`' records, each run naming its curve `method` and `budget`. With
    `baseline` (a curve name, e.g. "maj") every other row gains `vs`: the paired bootstrap 95% interval of its
    accuracy minus the baseline's at the same budget, over the same problems (evaluation/search_comparison.py).
    With `records_path`, each finished (method, budget) run is kept beside it as it ends and a later call with the
    same settings runs only the rest (evaluation/curve_progress.py). `on_run(row, done, total, resumed)` is called
    after each run (resumed: read back, not run)."""
    methods, budgets = list(methods), checked_budgets(budgets)
    if not methods:
        raise ValueError("evaluate_curves: methods is empty; give at least one SearchSettings")
    names = []
    for settings in methods:
        if not isinstance(settings, SearchSettings):
            raise TypeError(f"evaluate_curves: methods must be SearchSettings, got {type(settings).__name__}")
        if settings.method == "greedy":
            raise ValueError("evaluate_curves: greedy has one cost, not a budget; leave it out (evaluate_search "
                             "gives its row)")
        names.append(curve_name(settings))
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"evaluate_curves: two methods share the curve name {twice[0]!r}; give each its own shape")
    if baseline is not None and baseline not in names:
        raise ValueError(f"evaluate_curves: baseline {baseline!r} is not one of the curves ({', '.join(names)})")
    runs = check_methods([capped(settings, budget) for settings in methods for budget in budgets], scorer,
                         "evaluate_curves")  # before any run: the runs go one at a time
    progress_file = partial_path(records_path) if records_path is not None else None
    finished = finished_runs(progress_file) if progress_file is not None else {}
    rows, per_run = [], []
    for k, run in enumerate(runs):  # one at a time (each run seeds its own generator: the same as all at once)
        key = run_key(run, episodes, offset, batch_problems, seed)
        if key in finished:
            row, records = finished[key]["row"], finished[key]["records"]
        else:
            (row,), records = search_outcomes(policy, env, [run], scorer, episodes=episodes, offset=offset,
                                              batch_problems=batch_problems, seed=seed, progress=progress)
            row = {**row, "method": curve_name(run), "budget": run.max_tokens}
            records = [{**record, "runs": [{**outcome, "method": row["method"], "budget": run.max_tokens}
                                           for outcome in record["runs"]]} for record in records]
            if progress_file is not None:
                save_run(progress_file, key, row, records)
        rows.append(row)
        per_run.append(records)
        if on_run is not None:
            on_run(row, k + 1, len(runs), key in finished)
    on_curves = [{**first, "runs": [run for records in per_run for run in records[i]["runs"]]}
                 for i, first in enumerate(per_run[0])]
    if records_path is not None:
        write_problem_records(records_path, "search_curves", on_curves)
        progress_file.unlink(missing_ok=True)
    return with_intervals(rows, on_curves, baseline, seed=seed) if baseline is not None else rows


def checked_budgets(budgets: Sequence[int], caller: str = "evaluate_curves") -> list[int]:
    """The token budgets ascending, after checking them (integers >= 1, none repeated); a bad one is one line
    naming `caller`."""
    budgets = list(budgets)
    if len(budgets) == 0:
        raise ValueError(f"{caller}: budgets is empty; give tokens per problem, e.g. [100, 200, 400, 800]")
    for b in budgets:
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ValueError(f"{caller}: budgets must be integers >= 1 (tokens per problem), got {b!r}")
    if len(set(budgets)) != len(budgets):
        raise ValueError(f"{caller}: budgets repeat a value: {budgets}")
    return sorted(budgets)


def curves_table(rows: Sequence[dict]) -> str:
    """The rows of `evaluate_curves` as a markdown table (accuracy in %, one decimal); with "verifier
    tokens/problem" after "tokens/problem" when a row has it, and a last column of each row's interval against
    the baseline at its budget when the rows have one."""
    extra, verifier = vs_title(rows), verifier_tokens_cells(rows)
    titles = [title for _, title in COLUMNS] + ([extra] if extra else [])
    if verifier is not None:
        titles.insert(4, VERIFIER_TOKENS_TITLE)
    lines = ["| " + " | ".join(titles) + " |", "|" + "---|" * len(titles)]
    for i, row in enumerate(rows):
        cells = [str(row["method"]), str(row["budget"]), f"{100 * row['accuracy']:.1f}%",
                 f"{row['tokens_per_problem']:.1f}", str(row["problems"])]
        if verifier is not None:
            cells.insert(4, verifier[i])
        lines.append("| " + " | ".join(cells + ([vs_cell(row)] if extra else [])) + " |")
    return "\n".join(lines) + "\n"


def plot_curves(rows: Sequence[dict], path: str | Path, title: str = "") -> Path:
    """Accuracy (%) against tokens per problem really sampled, one line per method, saved as a PNG."""
    lines = {}
    for name in dict.fromkeys(row["method"] for row in rows):
        own = sorted((r for r in rows if r["method"] == name), key=lambda r: r["budget"])
        lines[name] = ([r["tokens_per_problem"] for r in own], [100 * r["accuracy"] for r in own])
    return save_line_plot(lines, path, title or "accuracy at equal token budgets", "tokens sampled per problem",
                          "accuracy (%)", log2_x=True)


def save_curves(rows: Sequence[dict], stem: str | Path, about: dict | None = None) -> tuple[Path, Path, Path]:
    """Write `<stem>.md` (table), `<stem>.json` (rows and `about`) and `<stem>.png` (the plot); returns them."""
    markdown, data = write_table(curves_table(rows), rows, stem, about)
    return markdown, data, plot_curves(rows, Path(stem).with_suffix(".png"))
