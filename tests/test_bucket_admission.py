"""The fast decoder's kept-bucket rule (policies/decoding/bucket_admission.py): use counts with aging, the victims
of a new bucket, and the replay of a traced run, which must give the run's own counts."""
from __future__ import annotations

import json

import pytest

from lmgym.policies.decoding.bucket_admission import UseCounts, replay, victims_for
from lmgym.policies.decoding.fast import FastDecoder
from tests.test_fast_decode import eos_prone_model, prompts_for


def test_use_counts_admit_a_more_used_shape_and_age_so_a_new_phase_gets_in():
    uses = UseCounts(age_every=8)
    for key in ["old"] * 6 + ["new"]:
        uses.asked(key)
    assert not uses.admits("new", ["old"]) and uses.admits("old", ["new"]) and uses.admits("new", [])
    uses.asked("new")  # the 8th request: every count halved (old 6 -> 3, new 2 -> 1)
    assert uses.counts == {"old": 3, "new": 1}
    for _ in range(8):  # the workload now asks for "new" only: "old" is halved again, "new" overtakes it
        uses.asked("new")
    assert uses.counts["old"] == 1 and uses.admits("new", ["old"])
    with pytest.raises(ValueError, match="age_every"):
        UseCounts(age_every=0)


def test_victims_are_the_least_recently_used_until_the_new_bucket_fits():
    kept = [("a", 2), ("b", 3), ("c", 4)]  # least recently used first: 9 bytes kept
    assert victims_for(kept, 9, 4, 10) == ["a", "b"]  # 9 + 4 - 10 = 3 over: a (2) is not enough
    assert victims_for(kept, 9, 1, 10) == []
    assert victims_for(kept, 9, 20, 10) == ["a", "b", "c"]  # not enough even with all dropped: all of them
    assert victims_for(kept, 9, 4, None) == []  # no budget


def _cycle(decoder, tok, rounds: int, lengths=(4, 20, 36)):  # buckets (8, 32), (8, 48), (8, 64): 2, 3, 4 units
    for _ in range(rounds):
        for length in lengths:
            decoder.generate(tok, [p + [5] * length for p in prompts_for(tok, 8)], 8, temperature=0.0)


def _unit(model, tok) -> int:
    sizing = FastDecoder(model, length_bucket=16)
    sizing.generate(tok, prompts_for(tok, 8), 4, temperature=0.0)
    return sizing.cached_bytes // next(length for _, length in sizing._buckets) * 16  # bytes of an (8, 16) bucket


@pytest.mark.parametrize("admit_by_use", [True, False])
def test_replaying_a_traced_run_gives_its_own_counts_and_answers_for_another_rule_or_budget(admit_by_use):
    model, tok = eos_prone_model()
    unit = _unit(model, tok)
    decoder = FastDecoder(model, cache_bytes=5 * unit, length_bucket=16)
    decoder.admit_by_use, decoder.bucket_trace = admit_by_use, []
    with decoder.keeping(7 * unit):  # a labelling block: a larger budget, trimmed back after it
        _cycle(decoder, tok, 3)
    _cycle(decoder, tok, 2)
    trace = json.loads(json.dumps(decoder.bucket_trace))  # as the benchmark writes and reads it
    assert {"event": "trim", "budget": 5 * unit} in trace
    stats = decoder.stats
    assert replay(trace, admit_by_use=admit_by_use) == {
        "requests": 15, "hits": 15 - stats["buckets_made"], "made": stats["buckets_made"],
        "evicted": stats["buckets_evicted"], "transient": stats["buckets_transient"]}
    admitted, lru = (stats["buckets_made"], replay(trace, admit_by_use=False)["made"]) if admit_by_use else (
        replay(trace, admit_by_use=True)["made"], stats["buckets_made"])
    assert (admitted, lru) == (7, 15)  # least recently used alone makes every bucket anew here
    assert replay(trace, admit_by_use=admit_by_use, budget_scale=10.0)["made"] == 3  # all fit: each made once
