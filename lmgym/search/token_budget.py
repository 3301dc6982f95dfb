"""A hard cap on the tokens sampled per problem (`SearchSettings.max_tokens`), charged in sampling order.

Batched sampling draws many samples of a problem at once; the cap is applied as if they were drawn one
after another in their batch order: each sample's tokens are charged in turn, the sample that would cross
the cap is cut there (its tokens up to the cap count; it is unfinished, so it neither votes nor is kept),
and samples after it were never drawn (not counted, not used). A problem whose cap is reached stops; so
every method under one cap spends exactly the cap on a problem unless it finishes before.

`sampled_within_budget` is the anytime sampler of maj, weighted_maj and best_of_n: rounds of `n` episodes
per problem, all problems in one batch per step, until each problem's cap is spent.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from lmgym.episodes.engine import Branch
from lmgym.search.search_play import play_out
from lmgym.search.search_types import sampled_tokens
from lmgym.search.settings import SearchSettings, engine_for


def charge_in_order(costs: Sequence[int], spent: int, cap: int | None) -> tuple[int, int]:
    """Charge `costs` in order on top of `spent` under `cap` (None: no cap). Returns (how many fit whole,
    the new total): the first cost that would cross the cap is cut there (the total becomes the cap)."""
    kept = 0
    for cost in costs:
        if cap is not None and spent + cost > cap:
            return kept, cap
        if cap is not None and spent >= cap:
            return kept, spent
        spent += cost
        kept += 1
    return kept, spent


def sampled_within_budget(policy, env, starts: Sequence[dict], settings: SearchSettings,
                          generator: torch.Generator | None) -> tuple[list[list[Branch]], list[int]]:
    """Finished episodes per problem (in sampling order) that fit `settings.max_tokens`, and each problem's
    tokens charged (the cap, unless a round sampled nothing new). Rounds of `settings.n` episodes."""
    cap, n = settings.max_tokens, settings.n
    if cap is None:
        raise ValueError("sampled_within_budget: settings.max_tokens is None; give a cap")
    engine = engine_for(policy, env, settings)
    kept: list[list[Branch]] = [[] for _ in starts]
    spent = [0] * len(starts)
    running = list(range(len(starts)))
    while running:
        branches = engine.start([starts[i] for i in running], n)
        play_out(engine, branches, [0] * len(running), generator)
        still = []
        for j, i in enumerate(running):
            group = branches[j * n:(j + 1) * n]
            fit, total = charge_in_order([sampled_tokens(b) for b in group], spent[i], cap)
            progressed = total > spent[i]
            kept[i] += group[:fit]
            spent[i] = total
            if total < cap and progressed:
                still.append(i)
        running = still
    return kept, spent
