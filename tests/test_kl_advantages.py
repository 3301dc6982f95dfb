import math

import pytest
import torch

from lmgym.algorithms.advantages import discounted_returns, group_advantages, rms_scale, zero_variance_groups
from lmgym.algorithms.kl import kl_estimate
from lmgym.evaluation.evaluate import majority_correct, pass_at_k


def test_kl_estimators_match_hand_values():
    logp = torch.tensor([math.log(0.5), math.log(0.2)])
    ref = torch.tensor([math.log(0.25), math.log(0.4)])
    # k1 = log p - log q
    assert torch.allclose(kl_estimate(logp, ref, "k1"), torch.tensor([math.log(2), math.log(0.5)]))
    # k2 = (log p - log q)^2 / 2
    assert torch.allclose(kl_estimate(logp, ref, "k2"),
                          torch.tensor([0.5 * math.log(2) ** 2, 0.5 * math.log(0.5) ** 2]))
    # k3 = q/p - 1 - log(q/p): q/p = 0.5 -> 0.5 - 1 + log 2; q/p = 2 -> 2 - 1 - log 2
    expected = torch.tensor([0.5 - 1 + math.log(2), 1 - math.log(2)])
    assert torch.allclose(kl_estimate(logp, ref, "k3"), expected, atol=1e-6)
    assert torch.all(kl_estimate(logp, logp, "k3") == 0)


def test_unknown_kl_estimator_is_a_clear_error():
    try:
        kl_estimate(torch.zeros(1), torch.zeros(1), "k4")
    except ValueError as err:
        assert "k4" in str(err) and "k3" in str(err)
    else:
        raise AssertionError("expected ValueError")


def test_group_advantages_hand_values():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 2.0])
    groups = torch.tensor([0, 0, 0, 0, 1, 1])
    adv = group_advantages(rewards, groups, scale_by_std=True, eps=0.0)
    std = torch.tensor([1.0, 0.0, 0.0, 1.0]).std(unbiased=True)  # 0.57735
    assert torch.allclose(adv[:4], torch.tensor([0.5, -0.5, -0.5, 0.5]) / std)
    assert torch.all(adv[4:] == 0)  # all-equal group: no signal
    dr = group_advantages(rewards, groups, scale_by_std=False)
    assert torch.allclose(dr[:4], torch.tensor([0.5, -0.5, -0.5, 0.5]))
    assert zero_variance_groups(rewards, groups).tolist() == [False, True]


def test_rms_scale_hand_values():
    """Divided by the root mean square over the masked tokens: 3, -4 and a masked 100 -> rms sqrt(12.5)."""
    values = torch.tensor([[3.0, -4.0, 100.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    scaled = rms_scale(values, mask)
    rms = math.sqrt((9 + 16) / 2)
    assert scaled[0].tolist() == pytest.approx([3 / rms, -4 / rms, 0.0], rel=1e-6)
    assert float((scaled ** 2 * mask).sum() / mask.sum()) == pytest.approx(1.0, rel=1e-6)  # unit scale
    assert rms_scale(torch.zeros(2, 3), torch.ones(2, 3)).abs().sum() == 0  # nothing to scale stays nothing


def test_discounted_returns():
    r = torch.tensor([[0.0, 1.0, 0.0, 2.0]])
    mask = torch.ones(1, 4)
    assert torch.allclose(discounted_returns(r, mask, 0.5), torch.tensor([[0.75, 1.5, 1.0, 2.0]]))


def test_pass_at_k_and_majority():
    assert pass_at_k(4, 0, 2) == 0.0
    assert pass_at_k(4, 4, 2) == 1.0
    assert abs(pass_at_k(4, 1, 2) - 0.5) < 1e-9  # 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert majority_correct(["5", "5", "6"], [True, True, False])
    assert not majority_correct(["6", "6", "5"], [False, False, True])
    assert not majority_correct([None, None], [False, False])


def test_one_zero_variance_test_behind_the_tensor_and_trajectory_views():
    from lmgym.algorithms.advantages import informative_groups, zero_variance_fraction
    from lmgym.buffers import Trajectory

    rows = [(0, 0.1 + 0.2), (0, 0.3), (1, 1.0), (1, 0.0), (2, 0.5)]  # equal up to rounding; mixed; alone
    trajs = [Trajectory([1], [2], [-1.0], [1], reward=r, group_id=g) for g, r in rows]
    rewards, groups = torch.tensor([r for _, r in rows], dtype=torch.float64), torch.tensor([g for g, _ in rows])
    assert zero_variance_groups(rewards, groups).tolist() == [True, False, True]
    assert [g[0].group_id for g in informative_groups(trajs)] == [1]
    assert zero_variance_fraction(trajs) == pytest.approx(2 / 3)
