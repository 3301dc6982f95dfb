"""Reward functions and combine_rewards against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from envs import combine_rewards, correctness_reward, format_reward


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


COMPONENTS = np.array([[1.0, 0.0], [0.0, 4.0], [1.0, 4.0], [0.0, 0.0]])


def test_uniform_is_the_weighted_mean():
    np.testing.assert_allclose(combine_rewards(COMPONENTS), [0.5, 2.0, 2.5, 0.0])
    np.testing.assert_allclose(combine_rewards(COMPONENTS, "uniform", weights=[3.0, 1.0]), [0.75, 1.0, 1.75, 0.0])


def test_std_weights_each_column_by_inverse_std():
    # column stds are 0.5 and 2 -> weights 2 and 0.5, normalised to 0.8 and 0.2
    np.testing.assert_allclose(combine_rewards(COMPONENTS, "std"), [0.8, 0.8, 1.6, 0.0])


def test_std_gives_zero_std_columns_zero_weight():
    np.testing.assert_allclose(combine_rewards([[1.0, 5.0], [0.0, 5.0]], "std"), [1.0, 0.0])
    np.testing.assert_allclose(combine_rewards([[2.0, 5.0], [2.0, 5.0]], "std"), [0.0, 0.0])


def test_l2_is_the_row_norm():
    np.testing.assert_allclose(combine_rewards(COMPONENTS, "l2"), [1.0, 4.0, math.sqrt(17.0), 0.0])


def test_pca_projects_on_first_component():
    # standardised columns sqrt(3/2)*[-1,0,1] and sqrt(3/2)*[-1,1,0]; correlation 0.5,
    # first component [1,1]/sqrt(2) -> projection sqrt(3)/2 * [-2, 1, 1]
    components = [[1.0, 1.0], [2.0, 3.0], [3.0, 2.0]]
    half_root3 = math.sqrt(3.0) / 2
    np.testing.assert_allclose(combine_rewards(components, "pca"), [-2 * half_root3, half_root3, half_root3])


def test_pca_sign_follows_the_column_sum_and_ignores_constant_columns():
    rising = [[0.0, 0.0, 7.0], [1.0, 3.0, 7.0], [0.0, 0.0, 7.0], [1.0, 3.0, 7.0]]
    root2 = math.sqrt(2.0)
    np.testing.assert_allclose(combine_rewards(rising, "pca"), [-root2, root2, -root2, root2])
    falling = [[1.0, 3.0], [0.0, 0.0]]
    np.testing.assert_allclose(combine_rewards(falling, "pca"), [root2, -root2])
    np.testing.assert_allclose(combine_rewards([[1.0, 1.0], [1.0, 1.0]], "pca"), [0.0, 0.0])


def test_unknown_method_and_bad_inputs_raise_value_error():
    with pytest.raises(ValueError, match="unknown combine method 'median'; valid methods: uniform, std, pca, l2"):
        combine_rewards(COMPONENTS, "median")
    with pytest.raises(ValueError, match="2-D"):
        combine_rewards([1.0, 2.0])
    with pytest.raises(ValueError, match="one entry per component"):
        combine_rewards(COMPONENTS, weights=[1.0])
    with pytest.raises(ValueError, match="only used by method='uniform'"):
        combine_rewards(COMPONENTS, "std", weights=[1.0, 1.0])


def test_correctness_reward_uses_the_env_verdict_when_present(monkeypatch):
    import envs.rewards

    calls = []
    monkeypatch.setattr(envs.rewards, "answers_equal", lambda *a, **k: calls.append(a) or True)
    assert correctness_reward("#### 71", "72", {"correct": False}) == 0.0
    assert correctness_reward("#### 72", "72", {"correct": True}) == 1.0
    assert calls == []
    assert correctness_reward("#### 71", "72", {}) == 1.0 and len(calls) == 1  # standalone: grades itself
    assert correctness_reward("#### 71", "72", {"correct": "yes"}) == 1.0 and len(calls) == 2  # not a verdict


def test_format_reward_non_str_completion_scores_zero():
    assert format_reward(None, "72", {}) == 0.0  # type: ignore[arg-type]
