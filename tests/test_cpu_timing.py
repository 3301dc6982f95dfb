"""tests/cpu_timing.py: a call's CPU seconds in reference seconds, so that a slow moment of the machine (its host
stealing time the guest counts as its own) does not fail a bound that the same work meets elsewhere."""
import time

from tests import cpu_timing


def burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_slowness_is_at_least_one_and_measured_again_when_stale(monkeypatch):
    monkeypatch.setattr(cpu_timing, "_SLOWNESS", [])
    first = cpu_timing.slowness()
    assert first >= 1.0
    assert cpu_timing.slowness() == first  # fresh: not measured again
    monkeypatch.setattr(cpu_timing, "REFERENCE_WORK_S", 1e-5)  # as if this machine were thousands of times slower
    monkeypatch.setattr(cpu_timing, "SLOWNESS_FRESH_S", 0.0)
    assert cpu_timing.slowness() > 100


def test_a_slow_call_counts_in_reference_seconds(monkeypatch):
    monkeypatch.setattr(cpu_timing, "_SLOWNESS", [])
    monkeypatch.setattr(cpu_timing, "SLOWNESS_FRESH_S", 0.0)
    monkeypatch.setattr(cpu_timing, "REFERENCE_WORK_S", 1e-5)  # every moment looks thousands of times slower
    _, seconds = cpu_timing.cpu_call(burn, 0.12)
    assert 0 < seconds < 0.01  # 0.12 CPU s here, divided by the slowness measured just after
    monkeypatch.setattr(cpu_timing, "REFERENCE_WORK_S", 1e6)  # a machine far quicker than the yardstick: 1
    _, seconds = cpu_timing.cpu_call(burn, 0.12)
    assert seconds >= 0.12


def test_a_quick_call_is_reported_as_it_is(monkeypatch):
    monkeypatch.setattr(cpu_timing, "slowness", lambda: 1 / 0)  # never asked for a call under REMEASURE_OVER_S
    assert cpu_timing.in_reference_seconds(0.01) == 0.01
    assert cpu_timing.in_reference_seconds(cpu_timing.REMEASURE_OVER_S) == cpu_timing.REMEASURE_OVER_S
