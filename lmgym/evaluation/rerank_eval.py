"""Verifiers compared on one pool of samples: each problem's n samples are drawn once, then chosen among by maj@n
and, under every scorer, by weighted maj@n and best-of-n; scorers can also be combined (the geometric mean of their
solution scores). This is how verifiers are compared in the field (the same candidates reranked): a row's
difference from maj@n is the choice alone, not another draw of samples, and every row spends the same policy
tokens. `search_eval.evaluate_search` runs each method on its own samples instead; on a GPU those draws differ
even under one seed (batched bf16 sampling), so its rows' differences carry sampling noise too.

Rows and problem records have `evaluate_search`'s form (kind "search": benchmarks/report.py recomputes them),
each record adding `samples`: every sample's parsed answer, verdict, tokens and score under each scorer (and the
tokens a generative scorer's check took), so any other choice rule, or the curves at smaller budgets
(`pool_curves`), can be recomputed from the file.
"""
from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from lmgym.core.problem_records import write_problem_records
from lmgym.evaluation.search_comparison import with_intervals
from lmgym.evaluation.search_eval import (
    VERIFIER_TOKENS,
    problem_identity,
    problem_starts,
    run_metrics,
    run_outcome,
    sample_auc,
    verifier_tokens,
)
from lmgym.policies.prm import AGGREGATIONS
from lmgym.search.search import best_of_n_pick, majority_pick, sampled_groups, solution_scores, weighted_majority_pick
from lmgym.search.search_play import parsed_answer, result_of
from lmgym.search.search_types import StepScorer, sampled_tokens
from lmgym.search.settings import SearchSettings
from lmgym.training.progress import phase_bar

RULES = {"weighted_maj": weighted_majority_pick, "best_of_n": best_of_n_pick}


def geometric_mean(scores: Sequence[float]) -> float:
    """The geometric mean of probabilities in [0, 1] (0 when any is 0): one low score vetoes, as a product of
    experts does, and the result stays a probability (weighted votes sum it)."""
    if any(s <= 0.0 for s in scores):
        return 0.0
    return math.exp(sum(math.log(s) for s in scores) / len(scores))


def evaluate_reranking(policy, env, settings: SearchSettings, scorers: Mapping[str, StepScorer], *,
                       aggregations: Mapping[str, str] | None = None,
                       combined: Mapping[str, Sequence[str]] | None = None, episodes: int = 256, offset: int = 0,
                       batch_problems: int = 64, seed: int = 0, progress: bool = False,
                       records_path: str | os.PathLike | None = None) -> list[dict]:
    """Sample `settings.n` episodes of each of `episodes` problems (from `offset`, as `episode_starts` picks
    them) once, at the settings' temperature and max_new_tokens, seeded by `seed`; score every sample with every
    scorer (`aggregations[name]` of its step scores, default `settings.aggregation`); then rows: maj@n, and
    weighted_maj and best_of_n under each scorer and each `combined` name (the geometric mean of the named
    scorers' solution scores), labelled as `SearchSettings` labels them ("default" unbracketed:
    weighted_maj@8, best_of_8[critic]). Each row is `evaluate_search`'s (seconds: the sampling's plus its
    scorers'; verifier tokens where its scorers count them; the scorer's AUC on the pool) with `vs`: the paired
    bootstrap 95% interval against maj@n over the problems. With `records_path` each problem's record is
    written there (kind "search", with `samples`)."""
    _check(settings, scorers, aggregations or {}, combined or {})
    aggregations = {name: (aggregations or {}).get(name, settings.aggregation) for name in scorers}
    combined = dict(combined or {})
    starts = problem_starts(env, episodes, offset, batch_problems, "evaluate_reranking")
    generator = torch.Generator(device=getattr(policy, "device", "cpu")).manual_seed(seed)
    seconds = {"sampling": 0.0, **{name: 0.0 for name in scorers}}
    generated = {name: 0 for name in scorers}
    records: list[dict] = []
    bar = phase_bar(f"rerank@{settings.n}", len(starts), "problem", progress)
    for first in range(0, len(starts), batch_problems):
        batch = starts[first:first + batch_problems]
        clock = time.perf_counter()
        groups, tokens = sampled_groups(policy, env, batch, settings, generator)
        seconds["sampling"] += time.perf_counter() - clock
        scores, checks = {}, {}
        for name, scorer in scorers.items():
            clock, before, items = time.perf_counter(), verifier_tokens(scorer), len(item_tokens(scorer) or ())
            scores[name] = solution_scores(groups, aggregations[name], scorer)
            seconds[name] += time.perf_counter() - clock
            if before is not None:
                generated[name] += verifier_tokens(scorer) - before
            own = (item_tokens(scorer) or [])[items:]
            if own and len(own) == sum(map(len, groups)):  # each sample's check, in the groups' order
                checks[name] = _split(own, groups)
        for name, parts in combined.items():
            scores[name] = [[geometric_mean(s) for s in zip(*(scores[p][g] for p in parts))]
                            for g in range(len(groups))]
            if any(p in checks for p in parts):  # every part's checks of each sample
                checks[name] = [[sum(checks[p][g][j] for p in parts if p in checks) for j in range(len(group))]
                                for g, group in enumerate(groups)]
        for k, (start, group, spent) in enumerate(zip(batch, groups, tokens)):
            records.append(_record(env, start, group, spent, {name: s[k] for name, s in scores.items()}, settings,
                                   {name: c[k] for name, c in checks.items()}))
        bar.update(len(batch))
    bar.close()
    rows = [_row(records, label, settings, seconds, generated, uses) for label, uses in
            _labels(settings, [*scorers, *combined], combined)]
    if records_path is not None:
        write_problem_records(records_path, "search", records)
    return with_intervals(rows, records, f"maj@{settings.n}", seed=seed)


def _labels(settings: SearchSettings, names: Sequence[str], combined: Mapping[str, Sequence[str]]
            ) -> list[tuple[str, tuple[str, ...]]]:
    """(row label, the scorers it used) in table order: maj@n, then weighted_maj and best_of_n of each name."""
    out = [(f"maj@{settings.n}", ())]
    for name in names:
        out += [(_label(settings, rule, name), tuple(combined.get(name, (name,)))) for rule in RULES]
    return out


def _label(settings: SearchSettings, rule: str, name: str) -> str:
    """A rule's row label under the scorer `name`, as SearchSettings labels it ("default" unbracketed)."""
    return dataclasses.replace(settings, method=rule, verifier=None if name == "default" else name).label


def item_tokens(scorer) -> list[int] | None:
    """The tokens a generative scorer generated for each item it scored, in order (its `item_tokens` list), or
    None when it keeps no such list."""
    found = getattr(scorer, "item_tokens", None)
    return found if isinstance(found, list) else None


def _split(flat: Sequence[int], groups: Sequence[Sequence]) -> list[list[int]]:
    out, first = [], 0
    for group in groups:
        out.append([int(x) for x in flat[first:first + len(group)]])
        first += len(group)
    return out


def _record(env, start, group, spent: int, scores: Mapping[str, list[float]], settings: SearchSettings,
            checks: Mapping[str, list[int]]) -> dict[str, Any]:
    """One problem's record: identity, every row's run, and the pool (answers, verdicts, tokens sampled, scores
    per scorer, and the tokens a generative scorer's check of each sample took)."""
    answers = [parsed_answer(b) for b in group]
    correct = [bool(b.outcome.correct) for b in group]
    chosen, details = majority_pick(answers)
    runs = [run_outcome(f"maj@{settings.n}", result_of(group[chosen], spent, details))]
    for name, own in scores.items():
        for rule, pick in RULES.items():
            chosen, details = pick(answers, own)
            details["sample_correct"] = correct
            runs.append(run_outcome(_label(settings, rule, name), result_of(group[chosen], spent, details)))
    identity = problem_identity(env, start, [])
    pool = {"answers": answers, "correct": correct, "tokens": [sampled_tokens(b) for b in group],
            "scores": {name: list(s) for name, s in scores.items()}}
    if checks:
        pool["verifier_tokens"] = {name: list(c) for name, c in checks.items()}
    return {**identity, "runs": runs, "samples": pool}


def _row(records: Sequence[Mapping], label: str, settings: SearchSettings, seconds: Mapping[str, float],
         generated: Mapping[str, int], uses: Sequence[str]) -> dict:
    runs = [run for record in records for run in record["runs"] if run["method"] == label]
    metrics = run_metrics(runs)
    spent = seconds["sampling"] + sum(seconds[name] for name in uses)
    tokens = metrics["tokens_per_problem"] * metrics["problems"]
    row = {"method": label, **metrics, "seconds": spent, "tokens_per_second": tokens / spent if spent > 0 else 0.0}
    if any(generated[name] for name in uses):
        row[VERIFIER_TOKENS] = sum(generated[name] for name in uses) / metrics["problems"]
    row.update(sample_auc(runs) or {})
    return row


def _check(settings, scorers, aggregations, combined) -> None:
    if not isinstance(settings, SearchSettings) or settings.method != "maj" or settings.max_tokens is not None:
        raise ValueError("evaluate_reranking: settings must be a SearchSettings of method 'maj' without max_tokens "
                         "(the pool is maj@n's samples)")
    if not scorers:
        raise ValueError("evaluate_reranking: no scorers; give at least one (e.g. {'default': prm})")
    for name in [*scorers, *combined]:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"evaluate_reranking: a scorer's name must be an identifier, got {name!r}")
    unknown = [n for n in aggregations if n not in scorers]
    if unknown:
        raise ValueError(f"evaluate_reranking: aggregations name unknown scorers: {', '.join(map(str, unknown))}")
    for name, how in aggregations.items():  # checked before anything is sampled
        if how not in AGGREGATIONS:
            raise ValueError(f"evaluate_reranking: aggregation of {name!r} must be one of {' | '.join(AGGREGATIONS)}; "
                             f"got {how!r}")
    for name, parts in combined.items():
        if name in scorers or len(parts) < 2 or any(p not in scorers for p in parts):
            raise ValueError(f"evaluate_reranking: combined {name!r} must be a new name over 2 or more of the "
                             f"scorers ({', '.join(scorers)}); got {list(parts)}")
