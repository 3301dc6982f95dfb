"""Search methods side by side: accuracy, tokens sampled per problem and throughput on the same problems,
as rows and as a markdown table (`search/evaluate.py` stays the plain greedy / pass@k evaluation)."""
from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from search.evaluate import episode_starts
from training.progress import phase_bar
from search.search import run_search
from search.settings import SCORED_METHODS, SearchSettings
from search.search_types import StepScorer

COLUMNS = (("method", "method"), ("accuracy", "accuracy"), ("tokens_per_problem", "tokens/problem"),
           ("problems", "problems"), ("seconds", "seconds"), ("tokens_per_second", "tokens/s"))


def evaluate_search(policy, env, methods: Sequence[SearchSettings], scorer: StepScorer | None = None,
                    episodes: int = 256, offset: int = 0, batch_problems: int = 64, seed: int = 0,
                    progress: bool = False) -> list[dict]:
    """Run each method on the same problems (`episodes` of them from problem `offset`, as `episode_starts`
    picks them), `batch_problems` problems searched together, each method's sampling seeded by `seed`.

    Returns one row per method: {method (its label), accuracy, tokens_per_problem (every token sampled,
    discarded candidates included), problems, seconds (wall clock), tokens_per_second}."""
    methods = list(methods)
    if not methods:
        raise ValueError("evaluate_search: methods is empty; give at least one SearchSettings")
    for settings in methods:
        if not isinstance(settings, SearchSettings):
            raise TypeError(f"evaluate_search: methods must be SearchSettings, got {type(settings).__name__}")
        if settings.method in SCORED_METHODS and scorer is None:
            raise ValueError(f"evaluate_search: method {settings.label} needs a step scorer (e.g. a PRM: --prm)")
    for name, value, least in (("episodes", episodes, 1), ("offset", offset, 0), ("batch_problems", batch_problems, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"evaluate_search: {name} must be an integer >= {least}, got {value!r}")
    everything = episode_starts(env, offset + episodes)
    if offset >= len(everything):
        raise ValueError(f"evaluate_search: offset {offset} is past the last problem (the env has {len(everything)})")
    starts = everything[offset:]
    return [_evaluate_one(policy, env, settings, scorer, starts, batch_problems, seed, progress) for settings in methods]


def _evaluate_one(policy, env, settings, scorer, starts, batch_problems, seed, progress) -> dict:
    generator = torch.Generator(device=getattr(policy, "device", "cpu")).manual_seed(seed)
    bar = phase_bar(settings.label, len(starts), "problem", progress)
    results, clock = [], time.perf_counter()
    for first in range(0, len(starts), batch_problems):
        results += run_search(policy, env, starts[first:first + batch_problems], settings, scorer, generator)
        bar.update(min(batch_problems, len(starts) - first))
    seconds = time.perf_counter() - clock
    bar.close()
    tokens = sum(r.tokens for r in results)
    return {"method": settings.label, "accuracy": sum(r.correct for r in results) / len(results),
            "tokens_per_problem": tokens / len(results), "problems": len(results), "seconds": seconds,
            "tokens_per_second": tokens / seconds if seconds > 0 else 0.0}


def markdown_table(rows: Sequence[dict]) -> str:
    """The rows of `evaluate_search` as a markdown table (accuracy in %, one decimal)."""
    lines = ["| " + " | ".join(title for _, title in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        cells = [str(row["method"]), f"{100 * row['accuracy']:.1f}%", f"{row['tokens_per_problem']:.1f}",
                 str(row["problems"]), f"{row['seconds']:.1f}", f"{row['tokens_per_second']:.0f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def save_table(rows: Sequence[dict], stem: str | Path, about: dict | None = None) -> tuple[Path, Path]:
    """Write `<stem>.md` (the markdown table) and `<stem>.json` (the rows, with `about`: the command's
    settings); returns both paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    markdown, data = stem.with_suffix(".md"), stem.with_suffix(".json")
    markdown.write_text(markdown_table(rows))
    data.write_text(json.dumps({"about": dict(about or {}), "rows": list(rows)}, indent=2) + "\n")
    return markdown, data
