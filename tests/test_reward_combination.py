"""The one reward combiner (algorithms/reward_combination.py) against hand values: every strategy (uniform,
std, pca, l2 on fixed matrices; env on episodes), not-applicable (NaN) and constant components, and a
reward followed through the whole pipeline its docstring describes."""
from __future__ import annotations

import math

import numpy as np
import pytest

from lmgym.algorithms.reward_combination import (
    COMBINATIONS,
    REWARD_COMBINATIONS,
    combine,
    combine_batch_rewards,
    std_weights,
)
from lmgym.buffers import Trajectory
from tests.tiers import slow
from tests.toy_env import DigitsEnv

NAN = float("nan")
# 4 episodes x 2 components. Column 0: mean 0.5, std 0.5. Column 1: mean 0.5, deviations -.3 -.1 .1 .3,
# variance (.09 + .01 + .01 + .09) / 4 = 0.05, std sqrt(0.05).
R = [[1.0, 0.2], [0.0, 0.4], [1.0, 0.6], [0.0, 0.8]]
S1 = math.sqrt(0.05)


# 4 episodes x 2 components (the matrix envs.combine_rewards was tested on). Column 0: std 0.5; column 1: std 2.
COMPONENTS = [[1.0, 0.0], [0.0, 4.0], [1.0, 4.0], [0.0, 0.0]]


def test_the_registry_holds_the_four_strategies_of_the_seed():
    assert list(COMBINATIONS) == ["uniform", "std", "pca", "l2"]
    assert REWARD_COMBINATIONS == ("env", "uniform", "std", "pca", "l2")  # the reward_combination setting


def test_uniform_is_the_mean_of_the_components():
    assert combine(R, "uniform") == pytest.approx([0.6, 0.2, 0.8, 0.4])
    assert combine(COMPONENTS, "uniform") == pytest.approx([0.5, 2.0, 2.5, 0.0])


def test_std_weights_each_component_by_its_share_of_the_summed_stds():
    w0, w1 = 0.5 / (0.5 + S1), S1 / (0.5 + S1)  # 0.690983, 0.309017
    assert std_weights(np.array(R)) == pytest.approx([w0, w1])
    assert combine(R, "std") == pytest.approx([w0 + 0.2 * w1, 0.4 * w1, w0 + 0.6 * w1, 0.8 * w1])
    assert combine(R, "std") == pytest.approx([0.7527864, 0.1236068, 0.8763932, 0.2472136])


def test_std_weighs_the_component_that_varies_more_more():
    # weights 0.5 / 2.5 = 0.2 and 2 / 2.5 = 0.8 (envs.combine_rewards weighed by 1/std: 0.8 and 0.2, reversed)
    assert combine(COMPONENTS, "std") == pytest.approx([0.2, 3.2, 3.4, 0.0])


def test_std_gives_a_constant_component_weight_zero():
    assert std_weights(np.array([[1.0, 5.0], [0.0, 5.0]])) == pytest.approx([1.0, 0.0])
    assert combine([[1.0, 5.0], [0.0, 5.0]], "std") == pytest.approx([1.0, 0.0])


def test_std_falls_back_to_uniform_weights_when_no_component_varies():
    constant = [[1.0, 0.5], [1.0, 0.5]]
    assert combine(constant, "std") == pytest.approx([0.75, 0.75])
    assert combine([[2.0, 5.0], [2.0, 5.0]], "std") == pytest.approx([3.5, 3.5])  # envs.combine_rewards: 0, 0


def test_pca_projects_standardised_components_on_the_first_axis_signed_so_more_is_better():
    # columns 0 and 1 perfectly correlated, column 2 constant (standardised to 0, loading 0):
    # z0 = z1 = (x - 1.5) / sqrt(1.25), axis (1, 1, 0) / sqrt(2), reward = sqrt(2) * z0
    matrix = [[0.0, 0.0, 5.0], [1.0, 2.0, 5.0], [2.0, 4.0, 5.0], [3.0, 6.0, 5.0]]
    z0 = (np.array([0.0, 1.0, 2.0, 3.0]) - 1.5) / math.sqrt(1.25)
    assert combine(matrix, "pca") == pytest.approx(math.sqrt(2) * z0)
    assert combine(matrix, "pca") == pytest.approx([-1.8973666, -0.6324555, 0.6324555, 1.8973666])
    flipped = [[-a, -b, c] for a, b, c in matrix]  # every component reversed: the reward reverses too
    assert combine(flipped, "pca") == pytest.approx(-math.sqrt(2) * z0)


def test_pca_of_two_correlated_components_is_their_standardised_sum_over_root_2():
    # standardised columns sqrt(3/2) * [-1, 0, 1] and sqrt(3/2) * [-1, 1, 0], correlation 0.5: the first axis is
    # (1, 1) / sqrt(2), so the projection is sqrt(3) / 2 * [-2, 1, 1]
    half_root3 = math.sqrt(3.0) / 2
    correlated = [[1.0, 1.0], [2.0, 3.0], [3.0, 2.0]]
    assert combine(correlated, "pca") == pytest.approx([-2 * half_root3, half_root3, half_root3])
    rising = [[0.0, 0.0, 7.0], [1.0, 3.0, 7.0], [0.0, 0.0, 7.0], [1.0, 3.0, 7.0]]  # column 2 constant
    root2 = math.sqrt(2.0)
    assert combine(rising, "pca") == pytest.approx([-root2, root2, -root2, root2])
    assert combine([[1.0, 3.0], [0.0, 0.0]], "pca") == pytest.approx([root2, -root2])


def test_pca_sign_follows_the_loadings_not_the_raw_scale():
    # a and b (0 or 1) rise together, c (0 or 10) falls: the axis (1, 1, -1) / sqrt(3) sums to > 0, so the
    # episodes a and b favour score sqrt(3). envs.combine_rewards signed by the raw column sum, which c's
    # scale dominates, and gave the opposite.
    matrix = [[1.0, 1.0, 0.0], [0.0, 0.0, 10.0], [1.0, 1.0, 0.0], [0.0, 0.0, 10.0]]
    root3 = math.sqrt(3.0)
    assert combine(matrix, "pca") == pytest.approx([root3, -root3, root3, -root3])


def test_pca_with_loadings_summing_to_zero_makes_its_largest_loading_positive():
    # R's columns correlate at -1/sqrt(5): axis (1, -1) / sqrt(2), whose sum is 0; the tie keeps loading 0 > 0.
    z0 = np.array([1.0, -1.0, 1.0, -1.0])
    z1 = np.array([-0.3, -0.1, 0.1, 0.3]) / S1
    assert combine(R, "pca") == pytest.approx((z0 - z1) / math.sqrt(2))


@slow
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
    assert combine(COMPONENTS, "l2") == pytest.approx([1.0, 4.0, math.sqrt(17.0), 0.0])
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
    with pytest.raises(ValueError, match=r"^reward combination needs a matrix \[episodes, components\].*shape \(2,\)$"):
        combine([1.0, 2.0], "uniform")
    with pytest.raises(ValueError, match=r"^reward combination 'env' keeps each episode's own reward .*no matrix form"):
        combine(R, "env")
    with pytest.raises(ValueError, match="'b' has an infinite value"):
        combine([[1.0, float("inf")]], "uniform", names=["a", "b"])


def scored_episode(env: DigitsEnv, text: str) -> Trajectory:
    """One finished single-step episode of `env`, its reward and info as the env gave them."""
    env.reset(seed=0)
    _, reward, _, _, info = env.step(text)
    return Trajectory(prompt_ids=[1], completion_ids=[2, 3], logprobs=[-1.0, -2.0], completion_mask=[1, 1],
                      reward=reward, info=info)


def weighted_env() -> DigitsEnv:
    """Components a = 1 and b = the digit fraction of the completion, weighted 2 and 1 by the env."""
    return DigitsEnv(reward_fns={"a": lambda c, g, i: 1.0, "b": lambda c, g, i: sum(map(str.isdigit, c)) / len(c)},
                     reward_weights={"a": 2.0, "b": 1.0})


def test_env_keeps_the_envs_weighted_sum_and_the_others_read_the_raw_components():
    env = weighted_env()
    batch = [scored_episode(env, "12"), scored_episode(env, "1x")]  # b = 1 and 0.5
    assert [t.info["reward_components"] for t in batch] == [{"a": 1.0, "b": 1.0}, {"a": 1.0, "b": 0.5}]
    assert [t.env_reward for t in batch] == [3.0, 2.5]  # 2 * a + 1 * b
    combine_batch_rewards(batch, "env")
    assert [(t.env_reward, t.reward, t.step_rewards) for t in batch] == [(3.0, 3.0, [3.0]), (2.5, 2.5, [2.5])]
    combine_batch_rewards(batch, "uniform")  # (a + b) / 2: the env's weights count only under env
    assert [t.env_reward for t in batch] == pytest.approx([1.0, 0.75])
    combine_batch_rewards(batch, "std")  # a is constant: weight 0, b takes it all
    assert [t.env_reward for t in batch] == pytest.approx([1.0, 0.5])
    combine_batch_rewards(batch, "env")  # env after another strategy changes nothing either
    assert [t.env_reward for t in batch] == pytest.approx([1.0, 0.5])


def test_a_reward_through_the_whole_pipeline_as_the_module_docstring_tells():
    from lmgym.algorithms import RLConfig
    from lmgym.algorithms.kl import pay_kl_in_reward
    from lmgym.algorithms.prm.reward import weigh_rewards
    from lmgym.buffers import REF_LOGPROBS, collate

    class HalfScorer:  # a PRM that scores every step 0.5
        def score_trajectories(self, trajectories):
            return [[0.5] * len(t.step_ends) for t in trajectories]

    env = DigitsEnv(reward_fns={"x": lambda c, g, i: float(c == "1x"), "y": lambda c, g, i: len(c) / 10})
    batch = [scored_episode(env, "1x"), scored_episode(env, "abcd")]  # components (1, 0.2) and (0, 0.4)
    assert [t.env_reward for t in batch] == pytest.approx([1.2, 0.4])                     # 1. the env's sum
    combine_batch_rewards(batch, "uniform")
    assert [t.env_reward for t in batch] == pytest.approx([0.6, 0.2])                     # 2. the batch's mean
    weigh_rewards(batch, HalfScorer(), RLConfig(outcome_weight=0.5, prm_weight=0.2))
    first = batch[0]  # 3. 0.6 * 0.5 + 0.2 * 0.5 = 0.4; env_reward stays 0.6
    assert (first.env_reward, first.reward) == pytest.approx((0.6, 0.4))
    assert first.shaping == pytest.approx({"outcome_scale": -0.3, "prm": 0.1})
    REF_LOGPROBS.set(first, [-1.5, -1.0])  # k1 per token: 0.5 and -1.0; beta 0.1 -> kl_penalty +0.05
    pay_kl_in_reward([first], 0.1, per_token=True)
    assert (first.env_reward, first.reward) == pytest.approx((0.6, 0.45))               # 4. the KL in the reward
    token_rewards = collate([first], pad_id=0).token_rewards[0]  # what GAE and REINFORCE's returns read
    assert token_rewards.tolist() == pytest.approx([-0.05, 0.6 - 0.3 + 0.1 + 0.1])
