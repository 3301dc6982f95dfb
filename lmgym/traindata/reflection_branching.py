"""Reflection episodes that share their contexts, for ``lmgym.traindata.reflection_context_pairs``: the episode
engine branches each problem's state after the actor's first answer into several critic turns, and each
critic turn's state into several refinements (``Branch.snapshot``), so refinements share one feedback and
feedbacks share one answer.

Each returned episode is one leaf: first answer, one feedback, one refinement (three actions). With
``max_turns`` > 2 the env has not ended it: its Trajectory is marked ``info["unfinished"]``. These are
training data, not an evaluation: score the roles with ``lmgym.evaluation.reflection_metrics`` on whole episodes.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from lmgym.buffers import Trajectory
from lmgym.episodes.engine import EpisodeEngine, SamplingSettings
from lmgym.policies.base import Policy


@torch.no_grad()
def branched_reflection_episodes(policies: Policy | Mapping[str, Policy], env, problems: Sequence[int], *,
                                 answers: int = 1, feedbacks: int = 4, refinements: int = 2,
                                 settings: SamplingSettings | None = None, seed: int = 0,
                                 batch_problems: int = 16) -> list[Trajectory]:
    """``answers`` first answers per problem index in ``problems``, ``feedbacks`` critic turns on each and
    ``refinements`` refinements after each feedback: answers x feedbacks x refinements leaves per problem, in
    that nesting order. Sampling needs ``settings.temperature`` > 0 for siblings to differ."""
    for name, value in (("answers", answers), ("feedbacks", feedbacks), ("refinements", refinements),
                        ("batch_problems", batch_problems)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"branched_reflection_episodes: {name} must be an int >= 1; got {value!r}")
    max_turns = getattr(getattr(env, "unwrapped", env), "max_turns", None)
    if not isinstance(max_turns, int):
        raise ValueError(f"branched_reflection_episodes needs a ReflectionEnv; got {type(env).__name__}")
    if max_turns < 2:
        raise ValueError(f"branched_reflection_episodes: the env runs max_turns={max_turns}; a refinement needs >= 2")
    engine = EpisodeEngine(env, policies, settings)
    device = getattr(next(iter(policies.values())) if isinstance(policies, Mapping) else policies, "device", "cpu")
    generator = torch.Generator(device=device).manual_seed(seed)
    leaves: list[Trajectory] = []
    problems = [int(i) for i in problems]
    for start in range(0, len(problems), batch_problems):
        chunk = problems[start:start + batch_problems]
        roots = engine.start([{"options": {"index": i}} for i in chunk], answers, first_group_id=start)
        engine.advance(roots, generator)  # first answers
        critics = [root.snapshot() for root in roots for _ in range(feedbacks)]
        engine.advance(critics, generator)  # one feedback each
        refined = [critic.snapshot() for critic in critics for _ in range(refinements)]
        engine.advance(refined, generator)  # one refinement each
        leaves += [branch.to_trajectory() for branch in refined]
    return leaves
