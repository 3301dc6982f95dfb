"""Every trainer computes what it computed before the package split (tests/golden/traces.json, recorded at
fb6f618): within float32 noise on any processor, bit for bit on the recording's processor model, and bit for
bit when run twice in one session on any machine.

Why not bit for bit everywhere: a vector unit of another make (an AMD EPYC against the Intel Xeon that
recorded the file, both reporting AVX512) orders float32 sums differently, and every trainer's numbers then
differ in the 7th significant digit from its second update on. Counts, token numbers and keys never differ.
"""
import json
import math
from pathlib import Path

import pytest
import torch

from tests.golden_traces import recording_machine, traces
from tests.tiers import slow

GOLDEN = Path(__file__).parent / "golden" / "traces.json"
REL_TOL = 1e-5  # float32 reduction order moves the 7th digit; a real change of a loss or a norm moves more
ABS_TOL = 1e-7  # float32 epsilon on O(1) terms that cancel: a group-normalised policy loss of ~5e-8, a first KL


def differences(fresh, recorded, path: str = "") -> list[str]:
    """Where `fresh` departs from `recorded`: floats beyond REL_TOL / ABS_TOL, anything else (keys, ints,
    strings, lengths) by any amount. Empty when they agree."""
    if isinstance(recorded, dict) and isinstance(fresh, dict):
        if fresh.keys() != recorded.keys():
            return [f"{path}: keys {sorted(fresh.keys() ^ recorded.keys())} differ"]
        return [d for k in recorded for d in differences(fresh[k], recorded[k], f"{path}.{k}")]
    if isinstance(recorded, list) and isinstance(fresh, list):
        if len(fresh) != len(recorded):
            return [f"{path}: {len(fresh)} items, recorded {len(recorded)}"]
        return [d for i, (a, b) in enumerate(zip(fresh, recorded)) for d in differences(a, b, f"{path}[{i}]")]
    if isinstance(recorded, float) and isinstance(fresh, float):
        if math.isclose(fresh, recorded, rel_tol=REL_TOL, abs_tol=ABS_TOL):
            return []
        return [f"{path}: {fresh!r}, recorded {recorded!r}"]
    if type(fresh) is not type(recorded) or fresh != recorded:
        return [f"{path}: {fresh!r}, recorded {recorded!r}"]
    return []


def _without_digests(all_traces: dict) -> dict:
    return {name: {k: v for k, v in trace.items() if k != "params"} for name, trace in all_traces.items()}


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


@pytest.fixture(scope="module")
def fresh() -> dict:
    threads = torch.get_num_threads()
    try:
        return traces()
    finally:
        torch.set_num_threads(threads)


def test_every_trainer_traces_as_recorded_within_float_noise(fresh, golden):
    found = differences(_without_digests(fresh), _without_digests(golden["traces"]))
    assert not found, "\n".join(found[:20])


@slow
def test_traces_are_bit_identical_when_run_twice(fresh):
    threads = torch.get_num_threads()
    try:
        again = traces()
    finally:
        torch.set_num_threads(threads)
    assert again == fresh


def test_traces_equal_the_record_bit_for_bit_on_its_processor(fresh, golden):
    here = recording_machine()
    recorded = {k: golden.get(k) for k in here}
    if here != recorded:
        pytest.skip(f"bit-exact record is of {recorded}; this machine is {here}")
    assert fresh == golden["traces"]


@pytest.mark.parametrize("change, caught", [
    (lambda t: t["grpo_std"]["rows"][1].update(grad_norm=t["grpo_std"]["rows"][1]["grad_norm"] * (1 + 1e-4)), True),
    (lambda t: t["sft"]["rows"][1].update(loss=t["sft"]["rows"][1]["loss"] * (1 + 1e-4)), True),
    (lambda t: t["sft"]["rows"][1].update(grad_norm=t["sft"]["rows"][1]["grad_norm"] * (1 + 2e-7)), False),
    (lambda t: t["ppo"]["rows"][0].update(iteration=t["ppo"]["rows"][0]["iteration"] + 1), True),
    (lambda t: t["dpo"]["weights"].update(l2=t["dpo"]["weights"]["l2"] * (1 + 1e-4)), True),
    (lambda t: t["prm"]["rows"][0].pop(next(iter(t["prm"]["rows"][0]))), True),
    (lambda t: t["reinforce"]["rows"].pop(), True),
])
def test_the_comparison_catches_real_changes_and_forgives_float_noise(golden, change, caught):
    changed = json.loads(json.dumps(golden["traces"]))
    change(changed)
    assert bool(differences(changed, golden["traces"])) is caught
