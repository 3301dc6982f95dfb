"""Search at inference: greedy chain of thought, self-consistency (maj@n), best-of-N with a step scorer,
step-level beam search with a step scorer, and MCTS, all behind `run_search`, which runs the method
registered under `settings.method` (`search/methods.py`; a new method is one `register_search_method`).

Every method plays all problems of `starts` together (one batched sampling call per engine step) and
returns one `SearchResult` per problem with every token it sampled for that problem, discarded candidates
included, so methods compare at equal token budgets. Methods choose by parsed answers and step scores
only; the env's verdict is recorded for reporting.

- greedy: one episode at temperature 0.
- maj: `n` episodes at `temperature`; the most frequent parsed answer wins (ties: first seen), and its
  first episode is the solution.
- weighted_maj: `n` episodes, scored like best_of_n's; each parsed answer's vote is the sum of its
  episodes' solution scores (probabilities, `search/votes.py`), the largest sum wins (ties: first
  seen), and its best-scored episode is the solution.
- best_of_n: `n` episodes; the step scorer scores all of them in one call and the highest solution score
  (`aggregation` of the step scores) wins among the episodes with a parsed answer (among all when none has).
- beam: see `search/beam_search.py`.
- mcts: `lmgym.search.mcts.MCTS` with `mcts` (an MCTSConfig: simulations, expand_k, wave_size, selection,
  answer rule, ...), sampling at these settings' temperature and max_new_tokens; its evaluation must be
  "prm" (a rollout's value is the env's reward, which inference may not read).

With `max_tokens` (a hard cap per problem, `search/token_budget.py`), maj, weighted_maj and best_of_n
sample rounds of `n` episodes until the cap and choose among the episodes that finished within it (a
problem with none is unanswered); beam and mcts stop at the cap.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import torch

from lmgym.policies.base import Policy
from lmgym.policies.prm import aggregate_step_scores
from lmgym.search.mcts import MCTS
from lmgym.search.methods import search_method
from lmgym.search.search_play import parsed_answer, play_out, result_of, step_scores
from lmgym.search.search_types import SearchResult, StepScorer
from lmgym.search.settings import SearchSettings, engine_for
from lmgym.search.token_budget import sampled_within_budget
from lmgym.search.votes import majority_answer, weighted_majority, weighted_votes


@torch.no_grad()
def run_search(policy: Policy, env, starts: Sequence[dict], settings: SearchSettings,
               scorer: StepScorer | None = None, generator: torch.Generator | None = None) -> list[SearchResult]:
    """Search every problem of `starts` (env.reset kwargs, e.g. {"options": {"index": 3}}) with
    `settings.method` (a method registered in `lmgym.search.methods`), all problems together; one
    `SearchResult` per start, in order.

    scorer: the step scorer best_of_n, beam and mcts need (a ProcessRewardModel, or any StepScorer); or a dict
        of named scorers, of which `settings.verifier` (None: "default") is used.
    generator: the sampling noise (None: torch's global generator)."""
    if not isinstance(settings, SearchSettings):
        raise TypeError(f"run_search: settings must be a SearchSettings, got {type(settings).__name__}")
    scorer = named_scorer(scorer, settings)
    method = search_method(settings.method)
    if method.needs_scorer and scorer is None:
        raise ValueError(f"run_search: method {settings.method!r} needs a step scorer (e.g. a ProcessRewardModel)")
    if scorer is not None and not isinstance(scorer, StepScorer):
        raise TypeError(f"run_search: scorer must have score_branches(branches) (a StepScorer), "
                        f"got {type(scorer).__name__}")
    starts = list(starts)
    if not starts:
        return []
    return method.search_fn()(policy, env, starts, settings, scorer, generator)


def named_scorer(scorer, settings: SearchSettings) -> StepScorer | None:
    """The scorer `settings` uses: `scorer` itself, or from a dict of named scorers the one `settings.verifier`
    names ("default" when None); a one-line ValueError naming the scorers given when it is not there."""
    if isinstance(scorer, Mapping):
        name = settings.verifier or "default"
        if name not in scorer:
            raise ValueError(f"run_search: {settings.label} needs the scorer {name!r}; given: "
                             f"{', '.join(map(str, scorer)) or 'none'}")
        return scorer[name]
    if settings.verifier is not None and scorer is not None:
        raise ValueError(f"run_search: {settings.label} names the scorer {settings.verifier!r}; give a dict of "
                         f"named scorers")
    return scorer


def mcts_search(policy, env, starts, settings, scorer, generator=None) -> list[SearchResult]:
    """mcts: `lmgym.search.mcts.MCTS` with `settings.mcts_config()`."""
    return MCTS(policy, env, scorer, settings.mcts_config()).search(starts, generator)


def greedy_search(policy, env, starts, settings, scorer=None, generator=None) -> list[SearchResult]:
    """greedy: one episode per problem at temperature 0."""
    engine = engine_for(policy, env, settings, temperature=0.0)
    branches, tokens = engine.start(starts, 1), [0] * len(starts)
    play_out(engine, branches, tokens, generator)
    return [result_of(b, tokens[i]) for i, b in enumerate(branches)]


def sampled_groups(policy, env, starts, settings, generator=None) -> tuple[list[list], list[int]]:
    """`settings.n` finished episodes per problem (one list of branches per problem) and each problem's sampled
    tokens; with `max_tokens`, the episodes that fit the cap (`sampled_within_budget`), possibly none."""
    if settings.max_tokens is not None:
        return sampled_within_budget(policy, env, starts, settings, generator)
    engine = engine_for(policy, env, settings)
    branches, tokens, n = engine.start(starts, settings.n), [0] * len(starts), settings.n
    play_out(engine, branches, tokens, generator)
    return [branches[i * n:(i + 1) * n] for i in range(len(starts))], tokens


def majority_pick(answers: Sequence[str | None], scores: Sequence[float] | None = None) -> tuple[int, dict]:
    """maj's choice among one problem's samples: (the first sample of the most frequent parsed answer, details)."""
    winner = majority_answer(list(answers))  # ties: the answer seen first
    return (list(answers).index(winner) if winner is not None else 0,
            {"votes": dict(Counter(a for a in answers if a is not None))})


def best_of_n_pick(answers: Sequence[str | None], scores: Sequence[float]) -> tuple[int, dict]:
    """best_of_n's choice: the highest-scored sample among those with a parsed answer (all when none has)."""
    answered = [j for j, a in enumerate(answers) if a is not None] or list(range(len(answers)))
    best = max(answered, key=lambda j: scores[j])  # ties: the first
    return best, {"scores": list(scores), "chosen": best}


def weighted_majority_pick(answers: Sequence[str | None], scores: Sequence[float]) -> tuple[int, dict]:
    """weighted_maj's choice: the answer with the largest summed score, then its best-scored sample."""
    winner = weighted_majority(answers, scores)
    voters = [j for j, a in enumerate(answers) if a == winner] if winner is not None else [0]
    chosen = max(voters, key=lambda j: scores[j])  # ties: the first
    return chosen, {"votes": weighted_votes(answers, scores), "scores": list(scores), "chosen": chosen}


def _per_problem(policy, env, starts, settings, generator, pick, scorer=None, scored=False) -> list[SearchResult]:
    """Sample each problem's group (`sampled_groups`), then keep the episode `pick(answers, scores)` names:
    (its index, details). `scores` are the solution scores when `scored`, else None."""
    groups, tokens = sampled_groups(policy, env, starts, settings, generator)
    scores = solution_scores(groups, settings.aggregation, scorer) if scored else [None] * len(groups)
    results = []
    for group, own, spent in zip(groups, scores, tokens):
        if not group:
            results.append(_unanswered(spent))
            continue
        chosen, details = pick([parsed_answer(b) for b in group], own)
        if scored:  # each sample's verdict beside its score, read only to report (the verifier's AUC on them)
            details["sample_correct"] = [bool(b.outcome.correct) for b in group]
        results.append(result_of(group[chosen], spent, details))
    return results


def majority_search(policy, env, starts, settings, scorer=None, generator=None) -> list[SearchResult]:
    """maj: `n` episodes per problem; the most frequent parsed answer wins."""
    return _per_problem(policy, env, starts, settings, generator, majority_pick)


def best_of_n_search(policy, env, starts, settings, scorer, generator=None) -> list[SearchResult]:
    """best_of_n: `n` episodes per problem; the highest solution score wins."""
    return _per_problem(policy, env, starts, settings, generator, best_of_n_pick, scorer, scored=True)


def weighted_majority_search(policy, env, starts, settings, scorer, generator=None) -> list[SearchResult]:
    """weighted_maj: `n` episodes per problem; each answer's vote is the sum of its episodes' scores."""
    return _per_problem(policy, env, starts, settings, generator, weighted_majority_pick, scorer, scored=True)


def solution_scores(groups: Sequence[Sequence], aggregation: str, scorer: StepScorer) -> list[list[float]]:
    """Every episode's solution score (`aggregation` of its step scores), all scored in one call; per group."""
    everything = [b for group in groups for b in group]
    flat = [aggregate_step_scores(s, aggregation) for s in step_scores(scorer, everything)]
    out, first = [], 0
    for group in groups:
        out.append(flat[first:first + len(group)])
        first += len(group)
    return out


def _unanswered(tokens: int) -> SearchResult:
    """A problem whose token cap ran out before any episode finished."""
    return SearchResult(trajectory=None, answer=None, correct=False, tokens=int(tokens), details={"finished": 0})
