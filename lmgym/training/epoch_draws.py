"""Which items a supervised trainer (PRM, SFT, DPO) takes at each iteration: seeded epochs."""
from __future__ import annotations

import numpy as np


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
