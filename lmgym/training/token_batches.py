"""Which items a trainer's iterations take, and how they are cut into micro-batches.

`EpochDraws`: which items a supervised trainer (PRM, SFT, DPO) takes at each iteration: seeded epochs.

Micro-batches sized by tokens (`max_tokens_per_microbatch`) rather than by a count of items.

A micro-batch of rows padded to its longest row allocates rows x longest tokens: `token_micro_batches`
sorts the items by length (so similar lengths share a micro-batch and little is padding) and cuts the
sorted run into the fewest consecutive micro-batches whose padded size stays within the budget; an
item longer than the budget runs alone. The grouping moves only which items share a forward pass: a
loss whose per-token weights count the whole optimizer step (algorithms/losses.py) gives the same
step however they are grouped.

Ranks may get different numbers of micro-batches. DDP and the plain all-reduce hold no collective
before the step's last backward, so that is fine there; FSDP all-gathers every layer in every forward,
so `same_count_on_every_rank` splits the largest micro-batches until every rank runs as many as the
busiest one (verl's dynamic batch size does the same with a max over ranks).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lmgym.training import distributed as dist


def padded_tokens(lengths: Sequence[int], group: Sequence[int]) -> int:
    """Tokens a micro-batch of the items `group` (indices into `lengths`) allocates: rows x longest row."""
    return len(group) * max((lengths[i] for i in group), default=0)


def token_micro_batches(lengths: Sequence[int], budget: int, rows: Sequence[int] | None = None,
                        max_items: int = 0) -> list[list[int]]:
    """Indices of `lengths`, shortest first (ties by index), cut into consecutive micro-batches of at most
    `budget` padded tokens (rows x longest row, item i being `rows[i]` rows, e.g. a preference pair's two;
    `padded_tokens` with one row an item) and, when `max_items` > 0, at most that many items; an item longer than
    `budget` gets a micro-batch of its own. Every index appears once; the result depends on the lengths (and rows)
    alone."""
    if budget <= 0:
        raise ValueError(f"token budget must be a positive integer, got {budget}")
    groups: list[list[int]] = []
    current: list[int] = []
    current_rows = 0
    for i in sorted(range(len(lengths)), key=lambda i: (lengths[i], i)):
        size = 1 if rows is None else rows[i]
        full = 0 < max_items <= len(current)
        if current and (full or (current_rows + size) * lengths[i] > budget):  # sorted: item i is the longest
            groups.append(current)
            current, current_rows = [], 0
        current.append(i)
        current_rows += size
    if current:
        groups.append(current)
    return groups


def split_to_count(groups: Sequence[Sequence[int]], lengths: Sequence[int], count: int) -> list[list[int]]:
    """`groups` with the micro-batch of most padded tokens (of two items or more; the first of equals) halved
    in place until there are `count`; each half keeps its order and stays within the budget the whole one
    met. A ValueError when there are fewer items than `count`."""
    out = [list(g) for g in groups]
    if count > sum(len(g) for g in out):
        raise ValueError(f"cannot make {count} micro-batches of {sum(len(g) for g in out)} items")
    while len(out) < count:
        k = max((k for k in range(len(out)) if len(out[k]) > 1), key=lambda k: (padded_tokens(lengths, out[k]), -k))
        half = len(out[k]) // 2
        out[k:k + 1] = [out[k][:half], out[k][half:]]
    return out


def same_count_on_every_rank(groups: list[list[int]], lengths: Sequence[int], setting: str) -> list[list[int]]:
    """`groups` split (`split_to_count`) to as many micro-batches as the rank with the most (one gather of
    every rank's counts). When a rank holds fewer items than that, every rank raises the same one-line
    ValueError naming `setting` (the config field to raise), rather than some ranks waiting forever."""
    counts = dist.gather_lists([(len(groups), len(lengths))])
    target, fewest = max(n for n, _ in counts), min(items for _, items in counts)
    if target > fewest:
        raise ValueError(f"{setting}: under FSDP every rank must run the same number of micro-batches, here "
                         f"{target}, but a rank holds only {fewest} items; raise {setting}")
    return split_to_count(groups, lengths, target)


class EpochDraws:
    """Iteration i takes the next `per_iteration` positions of an endless sequence of epochs; epoch e
    visits every one of `count` items once, in a permutation seeded by (seed, e). What an iteration draws
    depends only on its number, so a resumed run draws what an uninterrupted one would."""

    def __init__(self, count: int, seed: int):
        if count < 1:
            raise ValueError(f"EpochDraws: nothing to draw from (count {count})")
        self.count, self.seed = count, seed
        self._order: tuple[int, np.ndarray] | None = None  # (epoch, its permutation)

    def order(self, epoch: int) -> np.ndarray:
        """The item order of `epoch`."""
        if self._order is None or self._order[0] != epoch:
            self._order = (epoch, np.random.default_rng([self.seed, epoch]).permutation(self.count))
        return self._order[1]

    def indices(self, iteration: int, per_iteration: int) -> list[int]:
        """The item indices iteration `iteration` takes (0-based)."""
        start = iteration * per_iteration
        return [int(self.order(epoch)[index])
                for epoch, index in (divmod(p, self.count) for p in range(start, start + per_iteration))]
