"""`ReplayBuffer`: a bounded store of trajectories with minibatch iteration and save/load."""
from __future__ import annotations

import json
import os
from collections import deque
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from buffers.trajectory import Trajectory


class ReplayBuffer:
    """Holds up to `capacity` trajectories (oldest dropped first).

    On-policy algorithms `clear()` it every iteration; off-policy ones keep it and `sample()`, or reuse
    the episodes of earlier iterations with `recent()` (each trajectory records its `iteration`).
    `save`/`load` write JSON lines (safe to load: no pickle), so a run can resume or reuse a
    cached buffer (seed 002's --cache_buffer).
    """

    def __init__(self, capacity: int = 100_000):
        if capacity <= 0:
            raise ValueError(f"ReplayBuffer: capacity must be positive, got {capacity}")
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
            fh.write(json.dumps({"capacity": self.capacity}) + "\n")
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
    def load(cls, path: str | os.PathLike) -> "ReplayBuffer":
        """Read a file written by `save`; any bad line is a one-line ValueError naming file and line."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"replay buffer file not found: {path}")
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            raise ValueError(f"{path}: not a replay buffer file (not UTF-8 text)") from None
        lines = text.splitlines()
        if not lines:
            raise ValueError(f"{path}: empty file, not a replay buffer")
        if not text.endswith("\n"):
            raise ValueError(f"{path}:{len(lines)}: the last line is cut off (the file is truncated)")
        number = 1
        try:
            header = json.loads(lines[0])
            capacity = header.get("capacity") if isinstance(header, dict) else None
            if not (isinstance(capacity, int) and not isinstance(capacity, bool) and capacity > 0):
                raise ValueError(f"header must be {{\"capacity\": <positive integer>}}, got {lines[0][:80]}")
            buffer = cls(capacity)
            for number, line in enumerate(lines[1:], start=2):
                buffer.add(Trajectory.from_dict(json.loads(line, parse_constant=_reject_constant)))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}:{number}: not a replay buffer file (line is not JSON: {err.msg})") from None
        except (ValueError, TypeError) as err:
            raise ValueError(f"{path}:{number}: {' '.join(str(err).split())}") from None
        return buffer


def _is_count(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _reject_constant(name: str):
    """json.loads accepts NaN and Infinity; a buffer never holds them."""
    raise ValueError(f"{name} is not a valid number here")
