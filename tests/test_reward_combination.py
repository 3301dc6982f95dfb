"""The reward-combination strategies (algorithms/reward_combination.py) on fixed matrices, against hand values."""
from __future__ import annotations

import math

import numpy as np
import pytest

from algorithms.reward_combination import COMBINATIONS, combine, std_weights

NAN = float("nan")
# 4 episodes x 2 components. Column 0: mean 0.5, std 0.5. Column 1: mean 0.5, deviations -.3 -.1 .1 .3,
# variance (.09 + .01 + .01 + .09) / 4 = 0.05, std sqrt(0.05).
R = [[1.0, 0.2], [0.0, 0.4], [1.0, 0.6], [0.0, 0.8]]
S1 = math.sqrt(0.05)


def test_the_registry_holds_the_four_strategies_of_the_seed():
    assert list(COMBINATIONS) == ["uniform", "std", "pca", "l2"]


def test_uniform_is_the_mean_of_the_components():
    assert combine(R, "uniform") == pytest.approx([0.6, 0.2, 0.8, 0.4])


def test_std_weights_each_component_by_its_share_of_the_summed_stds():
    w0, w1 = 0.5 / (0.5 + S1), S1 / (0.5 + S1)  # 0.690983, 0.309017
    assert std_weights(np.array(R)) == pytest.approx([w0, w1])
    assert combine(R, "std") == pytest.approx([w0 + 0.2 * w1, 0.4 * w1, w0 + 0.6 * w1, 0.8 * w1])
    assert combine(R, "std") == pytest.approx([0.7527864, 0.1236068, 0.8763932, 0.2472136])


def test_std_falls_back_to_uniform_weights_when_no_component_varies():
    constant = [[1.0, 0.5], [1.0, 0.5]]
    assert combine(constant, "std") == pytest.approx([0.75, 0.75])


def test_pca_projects_standardised_components_on_the_first_axis_signed_so_more_is_better():
    # columns 0 and 1 perfectly correlated, column 2 constant (standardised to 0, loading 0):
    # z0 = z1 = (x - 1.5) / sqrt(1.25), axis (1, 1, 0) / sqrt(2), reward = sqrt(2) * z0
    matrix = [[0.0, 0.0, 5.0], [1.0, 2.0, 5.0], [2.0, 4.0, 5.0], [3.0, 6.0, 5.0]]
    z0 = (np.array([0.0, 1.0, 2.0, 3.0]) - 1.5) / math.sqrt(1.25)
    assert combine(matrix, "pca") == pytest.approx(math.sqrt(2) * z0)
    assert combine(matrix, "pca") == pytest.approx([-1.8973666, -0.6324555, 0.6324555, 1.8973666])
    flipped = [[-a, -b, c] for a, b, c in matrix]  # every component reversed: the reward reverses too
    assert combine(flipped, "pca") == pytest.approx(-math.sqrt(2) * z0)


def test_pca_with_loadings_summing_to_zero_makes_its_largest_loading_positive():
    # R's columns correlate at -1/sqrt(5): axis (1, -1) / sqrt(2), whose sum is 0; the tie keeps loading 0 > 0.
    z0 = np.array([1.0, -1.0, 1.0, -1.0])
    z1 = np.array([-0.3, -0.1, 0.1, 0.3]) / S1
    assert combine(R, "pca") == pytest.approx((z0 - z1) / math.sqrt(2))


def test_pca_matches_sklearn_up_to_the_sign_it_leaves_arbitrary():
    sklearn = pytest.importorskip("sklearn.decomposition")
    matrix = np.random.default_rng(0).random((12, 3)) * [1.0, 2.0, 0.5]
    z = (matrix - matrix.mean(0)) / matrix.std(0)
    expected = sklearn.PCA(n_components=1).fit_transform(z)[:, 0]
    ours = combine(matrix, "pca")
    assert np.abs(ours) == pytest.approx(np.abs(expected), abs=1e-9)


def test_pca_of_constant_components_is_zero():
    assert combine([[1.0, 2.0], [1.0, 2.0], [1.0, 2.0]], "pca") == pytest.approx([0.0, 0.0, 0.0])


def test_l2_is_the_euclidean_norm_and_refuses_a_negative_component():
    assert combine([[3.0, 4.0], [0.0, 0.0], [1.0, 0.0]], "l2") == pytest.approx([5.0, 0.0, 1.0])
    with pytest.raises(ValueError, match=r"'l2' needs components >= 0 .*'format' is -0.5"):
        combine([[1.0, 0.0], [0.2, -0.5]], "l2", names=["mrr", "format"])


def test_a_not_applicable_component_adds_nothing_to_any_strategy():
    matrix = [[1.0, NAN], [0.0, 1.0], [1.0, 0.0]]
    assert combine(matrix, "uniform") == pytest.approx([0.5, 0.5, 0.5])
    assert combine(matrix, "l2") == pytest.approx([1.0, 1.0, 1.0])
    # stds over the applicable values: column 0 sqrt(2/9), column 1 0.5
    s0 = math.sqrt(2 / 9)
    w0, w1 = s0 / (s0 + 0.5), 0.5 / (s0 + 0.5)
    assert combine(matrix, "std") == pytest.approx([w0, w1, w0])
    # pca: the NaN entry sits at its column's mean (0 once standardised)
    z0 = (np.array([1.0, 0.0, 1.0]) - 2 / 3) / s0
    z1 = np.array([0.0, 1.0, -1.0])
    rewards = combine(matrix, "pca")
    assert np.isfinite(rewards).all()
    u, s, vt = np.linalg.svd(np.column_stack([z0, z1]), full_matrices=False)
    axis = vt[0] if vt[0].sum() >= 0 else -vt[0]
    assert rewards == pytest.approx(np.column_stack([z0, z1]) @ axis)


def test_an_all_not_applicable_component_is_left_out():
    matrix = [[1.0, NAN], [0.0, NAN]]
    assert combine(matrix, "std") == pytest.approx([1.0, 0.0])
    assert combine(matrix, "pca") == pytest.approx([1.0, -1.0])


@pytest.mark.parametrize("method", list(COMBINATIONS))
def test_an_empty_batch_gives_no_rewards(method):
    assert combine(np.zeros((0, 2)), method).shape == (0,)


def test_bad_input_is_one_line():
    with pytest.raises(ValueError, match=r"^unknown reward combination 'mean'; choose one of uniform, std, pca, l2$"):
        combine(R, "mean")
    with pytest.raises(ValueError, match="with >= 1 component"):
        combine(np.zeros((3, 0)), "uniform")
    with pytest.raises(ValueError, match="'b' has an infinite value"):
        combine([[1.0, float("inf")]], "uniform", names=["a", "b"])
