"""Step-level beam search with a step scorer.

Each problem starts from `beam_width` copies of its prompt. At every step, each live beam of every
problem is expanded by `beam_expand` snapshots, all advanced together in one `engine.advance` call (one
sampling call per role), and all new candidates are scored in one scorer call. A problem keeps its top
candidates by solution score (`aggregation` of their step scores; "last" ranks by the last step's score):
as many as it still needs, `beam_width` minus the solutions it has finished. Kept candidates the env has
ended (or that reached the step limit) retire as finished solutions; the others are the next beams. A
problem is done when it has `beam_width` finished solutions or no beam left; its answer is its
best-scoring finished solution with a parsed answer (any finished one when none has).

With `max_tokens` (a hard cap per problem, `search/token_budget.py`), each step's candidates of a problem
are charged in order: the one that crosses the cap is cut and dropped with all after it, the problem keeps
from the candidates before it and then stops; with no finished solution it is unanswered.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from lmgym.episodes.engine import Branch
from lmgym.policies.base import Policy
from lmgym.policies.prm import aggregate_step_scores
from lmgym.search.search_play import parsed_answer, result_of, step_scores
from lmgym.search.search_types import SearchResult, StepScorer, sampled_tokens
from lmgym.search.settings import SearchSettings, engine_for
from lmgym.search.token_budget import charge_in_order


def beam_search(policy: Policy, env, starts: Sequence[dict], settings: SearchSettings, scorer: StepScorer,
                generator: torch.Generator | None = None) -> list[SearchResult]:
    """Beam search over the steps of every problem in `starts` together (see the module docstring)."""
    engine = engine_for(policy, env, settings)
    roots = engine.start(starts, 1)
    width, tokens = settings.beam_width, [0] * len(starts)
    beams: list[list[Branch]] = [[root.snapshot() for _ in range(width)] for root in roots]
    finished: list[list[tuple[float, Branch]]] = [[] for _ in starts]
    depth = 0
    while any(beams):
        candidates = [beam.snapshot() for group in beams for beam in group for _ in range(settings.beam_expand)]
        before = [sampled_tokens(c) for c in candidates]
        engine.advance(candidates, generator)
        costs: list[list[int]] = [[] for _ in starts]
        for child, count in zip(candidates, before):
            costs[child.group_id].append(sampled_tokens(child) - count)
        fits = []
        for i, own in enumerate(costs):
            fit, tokens[i] = charge_in_order(own, tokens[i], settings.max_tokens)
            fits.append(fit)
        seen = [0] * len(starts)
        within = []
        for child in candidates:  # each problem's candidates before its cut
            seen[child.group_id] += 1
            if seen[child.group_id] <= fits[child.group_id]:
                within.append(child)
        scores = [aggregate_step_scores(s, settings.aggregation) for s in step_scores(scorer, within)]
        depth += 1
        by_problem: list[list[tuple[float, Branch]]] = [[] for _ in starts]
        for score, child in zip(scores, within):
            by_problem[child.group_id].append((score, child))
        for i, scored in enumerate(by_problem):
            kept = sorted(scored, key=lambda pair: -pair[0])[:width - len(finished[i])]  # stable: ties keep order
            finished[i] += [(s, b) for s, b in kept if not engine.is_live(b)]
            beams[i] = [b for _, b in kept if engine.is_live(b)]
            if settings.max_tokens is not None and tokens[i] >= settings.max_tokens:
                beams[i] = []  # the cap is spent: stop here
    return [_answer(finished[i], tokens[i], depth) for i in range(len(starts))]


def _answer(finished: list[tuple[float, Branch]], tokens: int, depth: int) -> SearchResult:
    if not finished:  # the token cap ran out first
        return SearchResult(trajectory=None, answer=None, correct=False, tokens=tokens,
                            details={"score": None, "finished": 0, "steps": depth})
    answered = [pair for pair in finished if parsed_answer(pair[1]) is not None] or finished
    score, best = max(answered, key=lambda pair: pair[0])  # ties: the first
    return result_of(best, tokens, {"score": score, "finished": len(finished), "steps": depth})
