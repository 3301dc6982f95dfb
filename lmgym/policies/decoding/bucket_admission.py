"""Which new decode bucket a FastDecoder keeps once its budget is full: admission by use counts, with aging.

Least-recently-used eviction alone thrashes when a workload cycles through a set of shapes a little larger than
the budget: each bucket is dropped just before it is wanted again, so every visit makes it, and captures its CUDA
graph, anew. Step labels do this: W4a's 64-problem batches made 9-17 buckets each at kept_cache_share 0.4 of an
H200 (about 56 GB) and none after the first batches with 60 GB (benchmarks/RESULTS.md, nineteenth and
twenty-third sessions).

So a new bucket that does not fit is kept only when every bucket it would push out (least recently used first)
was asked for less often than it; otherwise it serves the call that asked for it and is dropped after it (a
transient bucket). The counts are halved every `age_every` requests, so shapes a workload stopped asking for
lose their claim and a new phase's shapes get in. This is the admission rule of TinyLFU (Einziger, Friedman and
Manes, 2017) with exact counts: a decoder asks for a few hundred distinct shapes, not millions of keys.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable

AGE_EVERY = 256  # requests between two halvings of every count


class UseCounts:
    """How often each bucket key was asked for (kept, made or transient), halved every `age_every` requests."""

    def __init__(self, age_every: int = AGE_EVERY):
        if age_every < 1:
            raise ValueError(f"age_every must be >= 1, got {age_every}")
        self.age_every = age_every
        self.counts: Counter = Counter()
        self.requests = 0

    def asked(self, key: Hashable) -> None:
        """Count one request for `key` (and age every count when a period ends)."""
        self.counts[key] += 1
        self.requests += 1
        if self.requests % self.age_every == 0:
            self.counts = Counter({k: c // 2 for k, c in self.counts.items() if c >= 2})

    def admits(self, key: Hashable, victims: Iterable[Hashable]) -> bool:
        """Whether `key` may push out `victims`: each was asked for less often than it (no victims: yes)."""
        mine = self.counts[key]
        return all(self.counts[victim] < mine for victim in victims)
