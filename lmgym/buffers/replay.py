"""`ReplayBuffer`: a bounded store of trajectories with minibatch iteration and save/load."""
from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from lmgym.buffers.trajectory import Trajectory
from lmgym.core.jsonl import loads, numbered_lines
from lmgym.core.messages import one_line

MAX_CAPACITY = 10**8  # far more trajectories than fit in memory; a larger capacity in a file is not ours


class ReplayBuffer:
    """Holds up to `capacity` trajectories (oldest dropped first).

    On-policy algorithms `clear()` it every iteration; off-policy ones keep it and `sample()`, or reuse
    the episodes of earlier iterations with `recent()` (each trajectory records its `iteration`).
    `save`/`load` write JSON lines (safe to load: no pickle), so a run can resume or reuse a
    cached buffer (seed 002's --cache_buffer). The first line, `{"capacity": C, "count": N}`, lets
    `load` tell a file cut short at a line boundary.
    """

    def __init__(self, capacity: int = 100_000):
        if capacity <= 0:
            raise ValueError(f"ReplayBuffer: capacity must be positive, got {capacity}")
        if capacity > MAX_CAPACITY:
            raise ValueError(f"ReplayBuffer: capacity must be at most {MAX_CAPACITY:_}, got {capacity:_}")
        self.capacity = capacity
        self._items: deque[Trajectory] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Trajectory]:
        return iter(self._items)

    def __getitem__(self, index: int) -> Trajectory:
        return self._items[index]

    def add(self, trajectory: Trajectory) -> None:
        if not isinstance(trajectory, Trajectory):
            raise TypeError(f"ReplayBuffer.add expects a Trajectory, got {type(trajectory).__name__}")
        self._items.append(trajectory)

    def extend(self, trajectories: Iterable[Trajectory]) -> None:
        for t in trajectories:
            self.add(t)

    def clear(self) -> None:
        self._items.clear()

    def sample(self, k: int, rng: np.random.Generator | None = None) -> list[Trajectory]:
        """k trajectories drawn uniformly without replacement."""
        if k > len(self):
            raise ValueError(f"ReplayBuffer.sample: asked for {k} trajectories, buffer holds {len(self)}")
        rng = rng or np.random.default_rng()
        return [self._items[i] for i in rng.choice(len(self), size=k, replace=False)]

    def recent(self, iterations: int, before: int) -> list[Trajectory]:
        """The trajectories sampled in the `iterations` training iterations before iteration `before`
        (`before - iterations <= t.iteration < before`), oldest first, in the order they were added."""
        if not (_is_count(iterations) and iterations >= 1):
            raise ValueError(f"ReplayBuffer.recent: iterations must be a positive integer, got {iterations!r}")
        if not (_is_count(before) and before >= 0):
            raise ValueError(f"ReplayBuffer.recent: before must be an iteration number >= 0, got {before!r}")
        chosen = [t for t in self._items if before - iterations <= t.iteration < before]
        return sorted(chosen, key=lambda t: t.iteration)  # stable: ties keep the order they were added in

    def minibatches(self, size: int, shuffle: bool = True, rng: np.random.Generator | None = None
                    ) -> Iterator[list[Trajectory]]:
        """Consecutive minibatches of `size` trajectories covering the buffer once (last may be smaller)."""
        if size <= 0:
            raise ValueError(f"minibatch size must be positive, got {size}")
        order = np.arange(len(self))
        if shuffle:
            (rng or np.random.default_rng()).shuffle(order)
        for start in range(0, len(order), size):
            yield [self._items[i] for i in order[start:start + size]]

    def save(self, path: str | os.PathLike) -> None:
        """Write the buffer as JSON lines (atomically: a crash never leaves a half-written file)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(path.suffix + ".tmp")
        with open(tmp, "w") as fh:
            fh.write(json.dumps({"capacity": self.capacity, "count": len(self._items)}) + "\n")
            for i, t in enumerate(self._items):
                try:
                    fh.write(json.dumps(t.to_dict(), allow_nan=False) + "\n")
                except ValueError:
                    fh.close()
                    tmp.unlink()
                    raise ValueError(f"ReplayBuffer.save({path}): trajectory {i} holds a NaN or infinite number "
                                     f"(reward {t.reward}); such a buffer could not be loaded back") from None
            fh.flush()
            os.fsync(fh.fileno())
        tmp.replace(path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> ReplayBuffer:
        """Read a file written by `save`; any problem is a one-line ValueError naming file and line: bad
        JSON or field, a capacity over MAX_CAPACITY, or fewer (more) trajectories than the header's count
        (a file truncated at a line boundary). Files of older versions, without a count, still load."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"replay buffer file not found: {path}")
        buffer, expected, number, line = None, None, 0, ""
        for number, line in numbered_lines(path):
            if not line.endswith("\n"):  # only the last line can lack one
                raise ValueError(f"{path}:{number}: the last line is cut off (the file is truncated)")
            if buffer is None:
                buffer, expected = cls._from_header(path, line)
                continue
            try:
                record = loads(line, path, number, parse_constant=_reject_constant)
            except ValueError as err:  # "<path>:<line>: <problem>" (core/jsonl.py)
                raise ValueError(f"{err} (not a replay buffer file)") from None
            try:
                buffer.add(Trajectory.from_dict(record))
            except (ValueError, TypeError) as err:
                raise ValueError(f"{path}:{number}: {one_line(str(err))}") from None
        if buffer is None:
            raise ValueError(f"{path}: empty file, not a replay buffer")
        if expected is not None and number - 1 != expected:
            raise ValueError(f"{path}: {number - 1} trajectories, the header says {expected} "
                             f"({'the file is truncated' if number - 1 < expected else 'lines were added'})")
        return buffer

    @classmethod
    def _from_header(cls, path: Path, line: str) -> tuple[ReplayBuffer, int | None]:
        """An empty buffer of the header's capacity, and the count it announces (None: an older file)."""
        try:
            header = loads(line, path, 1)
        except ValueError as err:
            raise ValueError(f"{err} (not a replay buffer file)") from None
        capacity = header.get("capacity") if isinstance(header, dict) else None
        count = header.get("count", 0) if isinstance(header, dict) else None
        if not (_is_int(capacity) and 0 < capacity <= MAX_CAPACITY and _is_int(count) and count >= 0):
            raise ValueError(f"{path}:1: header must be {{\"capacity\": <integer 1..{MAX_CAPACITY:_}>, \"count\": "
                             f"<integer >= 0>}}, got {one_line(line)[:80]}")
        return cls(capacity), header.get("count")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_count(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _reject_constant(name: str):
    """json.loads accepts NaN and Infinity; a buffer never holds them."""
    raise ValueError(f"{name} is not a valid number here")
