"""Step-level beam search with a step scorer.

Each problem starts from `beam_width` copies of its prompt. At every step, each live beam of every
problem is expanded by `beam_expand` snapshots, all advanced together in one `engine.advance` call (one
sampling call per role), and all new candidates are scored in one scorer call. A problem keeps its top
candidates by solution score (`aggregation` of their step scores; "last" ranks by the last step's score):
as many as it still needs, `beam_width` minus the solutions it has finished. Kept candidates the env has
ended (or that reached the step limit) retire as finished solutions; the others are the next beams. A
problem is done when it has `beam_width` finished solutions or no beam left; its answer is its
best-scoring finished solution with a parsed answer (any finished one when none has).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from search.settings import SearchSettings, engine_for
from search.search_play import advance_counting, parsed_answer, result_of, step_scores
from search.search_types import SearchResult, StepScorer
from episodes.engine import Branch
from policies.base import Policy
from policies.prm import aggregate_step_scores


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
        advance_counting(engine, candidates, tokens, generator)
        scores = [aggregate_step_scores(s, settings.aggregation) for s in step_scores(scorer, candidates)]
        depth += 1
        by_problem: list[list[tuple[float, Branch]]] = [[] for _ in starts]
        for score, child in zip(scores, candidates):
            by_problem[child.group_id].append((score, child))
        for i, scored in enumerate(by_problem):
            kept = sorted(scored, key=lambda pair: -pair[0])[:width - len(finished[i])]  # stable: ties keep order
            finished[i] += [(s, b) for s, b in kept if not engine.is_live(b)]
            beams[i] = [b for _, b in kept if engine.is_live(b)]
    return [_answer(finished[i], tokens[i], depth) for i in range(len(starts))]


def _answer(finished: list[tuple[float, Branch]], tokens: int, depth: int) -> SearchResult:
    answered = [pair for pair in finished if parsed_answer(pair[1]) is not None] or finished
    score, best = max(answered, key=lambda pair: pair[0])  # ties: the first
    return result_of(best, tokens, {"score": score, "finished": len(finished), "steps": depth})
