"""benchmarks/collective_time.py: the union of collective events' intervals, and a real gloo all-reduce found in a
profiled step."""
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as torch_dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from collective_time import profiled_collectives, union_seconds  # noqa: E402


def test_overlapping_and_nested_intervals_count_once():
    assert union_seconds([]) == 0.0
    assert union_seconds([(0, 10), (5, 20), (6, 7), (30, 40)]) == pytest.approx(30e-6)
    assert union_seconds([(30, 40), (0, 10)]) == pytest.approx(20e-6)


def test_a_gloo_all_reduce_in_the_step_is_counted_and_a_step_without_one_is_not(tmp_path):
    torch_dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        x = torch.ones(1 << 16)

        def communicating():
            for _ in range(4):
                torch_dist.all_reduce(x)

        found = profiled_collectives(communicating)
        assert 0 < found["collective_s"] <= found["step_s"] and 0 < found["collective_share"] <= 1
        assert profiled_collectives(lambda: (x * 2).sum())["collective_s"] == 0.0
    finally:
        torch_dist.destroy_process_group()
