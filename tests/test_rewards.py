"""Reward functions against hand-computed values. Combining them: tests/test_reward_combination.py."""

from __future__ import annotations

import pytest

from lmgym.envs import correctness_reward, format_reward


@pytest.mark.parametrize(
    "completion, gold, expected",
    [
        ("48 / 2 = 24, so 48 + 24 = 72.\n#### 72", "72", 1.0),
        ("#### 71", "72", 0.0),
        ("So the total is \\boxed{72}.", "72", 1.0),
        ("#### 1,000", "1000", 1.0),
        ("I am not sure.", "72", 0.0),
        ("", "72", 0.0),
    ],
)
def test_correctness_reward(completion, gold, expected):
    assert correctness_reward(completion, gold, {}) == expected


@pytest.mark.parametrize(
    "completion, expected",
    [
        ("work\n#### 72", 1.0),
        ("so \\boxed{\\frac{3}{4}}", 1.0),
        ("The answer is 72", 0.0),
        ("72", 0.0),
        ("#### ", 0.0),
        ("\\boxed{}", 0.0),
        ("\\boxed{72", 0.0),
    ],
)
def test_format_reward(completion, expected):
    assert format_reward(completion, "72", {}) == expected


def test_correctness_reward_uses_the_env_verdict_when_present(monkeypatch):
    import lmgym.envs.rewards.functions

    calls = []
    monkeypatch.setattr(lmgym.envs.rewards.functions, "answers_equal", lambda *a, **k: calls.append(a) or True)
    assert correctness_reward("#### 71", "72", {"correct": False}) == 0.0
    assert correctness_reward("#### 72", "72", {"correct": True}) == 1.0
    assert calls == []
    assert correctness_reward("#### 71", "72", {}) == 1.0 and len(calls) == 1  # standalone: grades itself
    assert correctness_reward("#### 71", "72", {"correct": "yes"}) == 1.0 and len(calls) == 2  # not a verdict


def test_format_reward_non_str_completion_scores_zero():
    assert format_reward(None, "72", {}) == 0.0  # type: ignore[arg-type]
