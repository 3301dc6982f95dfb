"""Peak CUDA memory per phase (training/phase_memory.py), on the CPU: torch.cuda's peak counters are replaced by a
fake allocator that each phase's own work raises by a known amount, so each metric shows which phase it came from;
phases reset the peak, yet the iteration's peak and a phase entered twice keep their highest; the evaluation
is measured apart. A CPU run logs no
memory metric, and nothing is reset outside the trainer's loop (benchmarks read torch's peak around it)."""
from __future__ import annotations

import pytest
import torch

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.envs import make
from lmgym.training.phase_memory import PhaseMemory
from lmgym.training.plots import memory_panels
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)

RESERVED_EXTRA = 0.25  # GB the fake allocator reserves above what it allocated


class FakeAllocator:
    """torch.cuda's peak counters over a fake allocator holding `held_gb` GB, raised for a moment by `spike`."""

    def __init__(self, held_gb: float = 1.0) -> None:
        self.held = held_gb * 1e9
        self.peak = self.held
        self.resets = 0

    def spike(self, gb: float) -> None:
        self.peak = max(self.peak, self.held + gb * 1e9)

    def max_memory_allocated(self, device=None) -> int:
        return int(self.peak)

    def max_memory_reserved(self, device=None) -> int:
        return int(self.peak + RESERVED_EXTRA * 1e9)

    def reset_peak_memory_stats(self, device=None) -> None:
        self.peak = self.held
        self.resets += 1


@pytest.fixture
def fake_cuda(monkeypatch) -> FakeAllocator:
    fake = FakeAllocator()
    for name in ("max_memory_allocated", "max_memory_reserved", "reset_peak_memory_stats"):
        monkeypatch.setattr(torch.cuda, name, getattr(fake, name))
    return fake


def grpo(policy, tmp_path, fake: FakeAllocator, monkeypatch, on_cuda: bool, evaluated: bool = True) -> GRPO:
    """GRPO with a reference (kl_coeff > 0) and two optimizer steps an iteration, whose sampling raises the fake
    peak by 3 GB, its reference pass by 2 GB, its two update steps by 0.5 then 1 GB and its evaluation (after
    the iteration) by 5 GB."""
    config = GRPOConfig(train_iterations=1, prompts_per_iteration=2, samples_per_prompt=4, max_new_tokens=6,
                        micro_batch_size=4, minibatch_size=4, kl_coeff=0.1, eval_at_start=False, eval_every=0,
                        eval_episodes=2, save_every=0, progress=False, output_dir=str(tmp_path / "run"), seed=0)
    algo = GRPO(policy, make("ToyDigits-v0"), config, eval_env=make("ToyDigits-v0") if evaluated else None)
    monkeypatch.setattr(algo.memory, "enabled", on_cuda)  # the trainer's device is the CPU here
    collect, score_in_chunks = algo.collect, algo.score_in_chunks
    update_step, evaluate = algo.update_step, algo.evaluate
    update_spikes = iter([0.5, 1.0])
    monkeypatch.setattr(algo, "collect", lambda: (fake.spike(3.0), collect())[1])
    monkeypatch.setattr(algo, "score_in_chunks", lambda *a: (fake.spike(2.0), score_in_chunks(*a))[1])
    monkeypatch.setattr(algo, "update_step", lambda chosen: (fake.spike(next(update_spikes)), update_step(chosen))[1])
    monkeypatch.setattr(algo, "evaluate", lambda: (fake.spike(5.0), evaluate())[1])
    return algo


def memory_metrics(row: dict) -> dict:
    return {key: value for key, value in row.items() if key.startswith("memory_")}


@slow
@pytest.mark.plots  # reads the run's PNGs (tests/conftest.py)
def test_each_phase_reports_its_own_peak_and_the_iteration_the_highest(tiny_policy, tmp_path, fake_cuda, monkeypatch):
    rows = grpo(tiny_policy, tmp_path, fake_cuda, monkeypatch, on_cuda=True).train()
    allocated = {"sample": 4.0, "reference": 3.0, "advantages": 1.0, "update": 2.0, "": 4.0,  # 1 GB held throughout
                 "evaluate": 6.0}  # after the iteration: not in its peak
    expected = {}
    for phase, gb in allocated.items():
        suffix = f"_{phase}" if phase else ""
        expected[f"memory_peak_gb{suffix}"] = gb
        expected[f"memory_reserved_peak_gb{suffix}"] = gb + RESERVED_EXTRA
    assert memory_metrics(rows[-1]) == pytest.approx(expected)
    assert [panel[1] for panel in memory_panels(rows)] == [["memory_peak_gb_sample", "memory_peak_gb_reference",
                                                            "memory_peak_gb_advantages", "memory_peak_gb_update",
                                                            "memory_peak_gb", "memory_peak_gb_evaluate"]]
    assert (tmp_path / "run" / "metrics.png").is_file()


@slow
def test_a_cpu_run_logs_no_memory_metric_and_resets_nothing(tiny_policy, tmp_path, fake_cuda, monkeypatch):
    rows = grpo(tiny_policy, tmp_path, fake_cuda, monkeypatch, on_cuda=False).train()
    assert "time_update" in rows[-1] and "eval_accuracy" in rows[-1]
    assert memory_metrics(rows[-1]) == {} and memory_panels(rows) == []
    assert fake_cuda.resets == 0 and not PhaseMemory(torch.device("cpu")).enabled


@slow
def test_no_evaluation_no_evaluation_memory(tiny_policy, tmp_path, fake_cuda, monkeypatch):
    rows = grpo(tiny_policy, tmp_path, fake_cuda, monkeypatch, on_cuda=True, evaluated=False).train()
    assert "memory_peak_gb" in rows[-1] and not any(key.endswith("_evaluate") for key in rows[-1])


def test_outside_the_trainer_loop_nothing_is_measured_or_reset(tiny_policy, tmp_path, fake_cuda, monkeypatch):
    algo = grpo(tiny_policy, tmp_path, fake_cuda, monkeypatch, on_cuda=True)
    metrics = algo.train_iteration()  # as benchmarks/w1_benchmark.py calls it, reading torch's own peak around it
    assert memory_metrics(metrics) == {} and fake_cuda.resets == 0
    assert fake_cuda.max_memory_allocated() == 4e9  # the whole iteration's peak, still there for the benchmark


def test_nested_phases_and_a_phase_entered_twice(fake_cuda, monkeypatch):
    memory = PhaseMemory(torch.device("cpu"))
    monkeypatch.setattr(memory, "enabled", True)
    with memory.iteration():
        with memory.phase("outer"):
            fake_cuda.spike(1.0)
            with memory.phase("inner"):  # resets the peak: the outer phase's 2 GB so far is credited first
                fake_cuda.spike(0.5)
            fake_cuda.spike(0.25)
        for spike in (2.0, 0.5):  # the same phase twice: its highest peak
            with memory.phase("again"):
                fake_cuda.spike(spike)
    assert {k: v for k, v in memory.metrics().items() if k.startswith("memory_peak")} == {
        "memory_peak_gb_inner": 1.5, "memory_peak_gb_outer": 2.0, "memory_peak_gb_again": 3.0, "memory_peak_gb": 3.0}
