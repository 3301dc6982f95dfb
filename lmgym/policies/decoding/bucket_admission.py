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

`replay` runs a recorded request trace (`FastDecoder.bucket_trace`) through the same rule, or least recently used
alone, at another budget or aging period: the requests a workload makes do not depend on what was kept, so one
traced GPU run answers what other settings would have made (benchmarks/bucket_replay.py).
"""
from __future__ import annotations

from collections import Counter, OrderedDict
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


def victims_for(kept: Iterable[tuple[Hashable, int]], total: int, need: int, budget: int | None) -> list:
    """The keys of `kept` ((key, bytes), least recently used first; the bucket in use left out by the caller) to
    drop so that `total` kept bytes less theirs plus `need` fit `budget`: all of them when even that is not
    enough, none without a budget."""
    if budget is None:
        return []
    over, victims = total + need - budget, []
    for key, size in kept:
        if over <= 0:
            break
        victims.append(key)
        over -= size
    return victims


def replay(trace: list[dict], admit_by_use: bool = False, age_every: int = AGE_EVERY,
           budget_scale: float = 1.0) -> dict[str, int]:
    """Requests, hits, buckets made, kept after a drop or not, and transient, of `trace` (FastDecoder.bucket_trace,
    from an empty cache) under least recently used alone (the decoder's default) or the admission rule,
    `age_every` and every budget times `budget_scale`."""
    kept: OrderedDict = OrderedDict()
    sizes: dict = {}
    uses, out = UseCounts(age_every), Counter()

    def drop(victims: list) -> None:
        for victim in victims:
            del kept[victim]
            out["evicted"] += 1

    for entry in trace:
        budget = None if entry["budget"] is None else int(entry["budget"] * budget_scale)
        if entry.get("event") == "trim":
            drop(victims_for(kept.items(), sum(kept.values()), 0, budget))
            continue
        key = tuple(entry["key"])
        if entry.get("bytes") is not None:
            sizes[key] = entry["bytes"]
        uses.asked(key)
        out["requests"] += 1
        if key in kept:
            kept.move_to_end(key)
            out["hits"] += 1
            continue
        out["made"] += 1
        keep = tuple(entry["keep"]) if entry.get("keep") is not None else None
        victims = victims_for(((k, s) for k, s in kept.items() if k != keep), sum(kept.values()), entry["need"],
                              budget)
        if admit_by_use and not uses.admits(key, victims):
            out["transient"] += 1
            continue
        drop(victims)
        kept[key] = sizes[key]
    return {name: out[name] for name in ("requests", "hits", "made", "evicted", "transient")}
