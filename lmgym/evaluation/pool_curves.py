"""Accuracy against tokens per problem from ONE pool of samples: every choice rule under every scorer at every
budget, without sampling again for each.

`evaluate_reranking` draws each problem's pool once and keeps every sample's answer, verdict, scores, tokens
and (for a generative verifier) the tokens its check generated. A capped run of maj, weighted_maj or best_of_n
charges its samples in sampling order and keeps those that fit the cap (`search/token_budget.py`); so the run at
budget B is the pool's prefix that `charge_in_order` keeps, and one pool drawn past the largest budget gives
every rule's curve. The rows differ from one another by the choice alone (as the uncapped table's do), and the
sampling that separate capped runs repeat per method and budget (the critic's curves took over 18 minutes a
method on an H200 and never finished) is paid once. A problem whose pool holds fewer tokens than a budget spends
its whole pool there (the row's tokens/problem says so).

`scorers_on_pool` says why a scorer's rows gain or not: its AUC over every sample of the pool, its AUC within problems
(over right-wrong pairs of one problem's samples, the only pairs a choice among them compares) and the pool's
reach (problems with a right sample), which bounds what any choice can gain over maj.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lmgym.evaluation.curves import checked_budgets
from lmgym.evaluation.search_comparison import with_intervals
from lmgym.evaluation.search_eval import VERIFIER_TOKENS, run_metrics
from lmgym.evaluation.verifier_metrics import roc_auc, within_problem_auc
from lmgym.search.search import best_of_n_pick, majority_pick, weighted_majority_pick
from lmgym.search.token_budget import charge_in_order

SCORED_RULES = {"weighted_maj": weighted_majority_pick, "best_of_n": best_of_n_pick}


def rule_name(rule: str, scorer: str | None) -> str:
    """A curve's name: the rule, with its scorer in brackets unless it is the default one (maj has none)."""
    return rule if scorer in (None, "default") else f"{rule}[{scorer}]"


def pool_curves(records: Sequence[Mapping[str, Any]], budgets: Sequence[int], seed: int = 0
                ) -> tuple[list[dict], list[dict]]:
    """The curves of maj, and weighted_maj and best_of_n under each scorer of the pool, at each budget, from
    `evaluate_reranking`'s problem records (each with `samples`: answers, correct, tokens, scores, and
    verifier_tokens where a scorer generated some). Returns (rows, records): a row per (curve, budget) as
    `evaluate_curves` gives them (method, budget, accuracy, tokens_per_problem, problems; verifier tokens per
    problem where the scorer generated them; `vs`: the paired bootstrap interval against maj at the same
    budget), and per-problem records of kind "search_curves" (each run names its method and budget)."""
    budgets = _checked(records, budgets)
    names = list(records[0]["samples"]["scores"])
    curve_records = [{**{k: v for k, v in record.items() if k not in ("runs", "samples")},
                      "runs": [run for budget in budgets for run in _runs(record["samples"], names, budget)]}
                     for record in records]
    methods = ["maj"] + [rule_name(rule, name) for name in names for rule in SCORED_RULES]
    rows = []
    for method in methods:
        for budget in budgets:
            runs = [run for record in curve_records for run in record["runs"]
                    if run["method"] == method and run["budget"] == budget]
            row = {"method": method, "budget": budget, **run_metrics(runs)}
            if any(VERIFIER_TOKENS in run for run in runs):
                row[VERIFIER_TOKENS] = sum(run.get(VERIFIER_TOKENS, 0) for run in runs) / len(runs)
            rows.append(row)
    return with_intervals(rows, curve_records, "maj", seed=seed), curve_records


def scorers_on_pool(records: Sequence[Mapping[str, Any]]) -> list[dict]:
    """A row per scorer of the pool (`evaluate_reranking`'s records): `auc` over every sample, `within_problem_auc`
    and `mixed_problems` (those holding a right and a wrong sample), and the pool's `reach` (the share of problems
    with a right sample) and `sample_accuracy`. An AUC is None where the samples hold one class."""
    _checked_pool(records, "scorers_on_pool")
    correct = [[bool(c) for c in record["samples"]["correct"]] for record in records]
    reach = sum(any(row) for row in correct) / len(records)
    accuracy = sum(map(sum, correct)) / max(1, sum(map(len, correct)))
    rows = []
    for name in records[0]["samples"]["scores"]:
        scores = [[float(x) for x in record["samples"]["scores"][name]] for record in records]
        within = within_problem_auc(scores, correct)
        rows.append({"scorer": name, "auc": roc_auc([x for row in scores for x in row],
                                                   [c for row in correct for c in row]),
                     "within_problem_auc": None if within is None else within[0],
                     "mixed_problems": 0 if within is None else within[1], "problems": len(records),
                     "reach": reach, "sample_accuracy": accuracy})
    return rows


def scorers_on_pool_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown of `scorers_on_pool`' rows: a line per scorer."""
    def auc(value):
        return "-" if value is None else f"{value:.3f}"
    lines = ["| scorer | AUC, every sample | AUC within problems | mixed problems | reach (a right sample) "
             "| sample accuracy |", "|---|---|---|---|---|---|"]
    lines += [f"| {r['scorer']} | {auc(r['auc'])} | {auc(r['within_problem_auc'])} | {r['mixed_problems']} of "
              f"{r['problems']} | {r['reach']:.1%} | {r['sample_accuracy']:.1%} |" for r in rows]
    return "\n".join(lines) + "\n"


def _runs(samples: Mapping[str, Any], names: Sequence[str], budget: int) -> list[dict]:
    """One problem's run of each curve at `budget`: the pool's prefix that fits, chosen among by each rule."""
    kept, spent = charge_in_order(samples["tokens"], 0, budget)
    answers, correct = samples["answers"][:kept], samples["correct"][:kept]
    runs = [_run("maj", budget, answers, correct, spent, majority_pick(answers)[0] if kept else None)]
    for name in names:
        scores = samples["scores"][name][:kept]
        generated = samples.get("verifier_tokens", {}).get(name)
        for rule, pick in SCORED_RULES.items():
            run = _run(rule_name(rule, name), budget, answers, correct, spent,
                       pick(answers, scores)[0] if kept else None)
            if generated is not None:  # a generative verifier checked every kept sample
                run[VERIFIER_TOKENS] = int(sum(generated[:kept]))
            runs.append(run)
    return runs


def _run(method: str, budget: int, answers: Sequence, correct: Sequence[bool], spent: int,
         chosen: int | None) -> dict:
    """A curve's run on one problem: the chosen sample's answer and verdict (none when nothing fit)."""
    return {"method": method, "budget": budget, "answer": None if chosen is None else answers[chosen],
            "correct": False if chosen is None else bool(correct[chosen]), "tokens": int(spent)}


def _checked(records: Sequence[Mapping[str, Any]], budgets: Sequence[int]) -> list[int]:
    """The budgets ascending, after checking them and that every record holds a pool with per-sample tokens."""
    budgets = checked_budgets(budgets, "pool_curves")
    _checked_pool(records, "pool_curves")
    return budgets


def _checked_pool(records: Sequence[Mapping[str, Any]], caller: str) -> None:
    """A one-line ValueError naming `caller` unless every record holds a pool with per-sample tokens, scored by the
    same scorers as the first (the curves take the scorers' names from it)."""
    if not records:
        raise ValueError(f"{caller}: no problem records")
    for i, record in enumerate(records):
        samples = record.get("samples")
        if not isinstance(samples, Mapping) or "tokens" not in samples:
            raise ValueError(f"{caller}: record {i} has no per-sample tokens (samples.tokens): give "
                             f"evaluate_reranking's records")
        if not (len(samples["tokens"]) == len(samples["answers"]) == len(samples["correct"])):
            raise ValueError(f"{caller}: record {i}'s samples disagree in length (tokens, answers, correct)")
    first = sorted(records[0]["samples"].get("scores", {}))
    for i, record in enumerate(records):
        scorers = sorted(record["samples"].get("scores", {}))
        if scorers != first:
            raise ValueError(f"{caller}: record {i} is scored by {', '.join(scorers) or 'nothing'}, record 0 by "
                             f"{', '.join(first) or 'nothing'}: one pool has one set of scorers")
