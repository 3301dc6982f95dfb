"""Step credit from a verifier (prm_credit="progress"): score differences, their spread over each step's tokens,
and GRPO's per-token advantages on a scripted trajectory with known PRM scores, by hand."""
import math

import pytest
import torch

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.algorithms.prm.reward import PRM_REWARDS, STEP_ENDS, add_prm_rewards, weigh_rewards
from lmgym.algorithms.prm.step_credit import progress_advantages, score_progress, spread_over_steps
from lmgym.buffers import Trajectory, collate
from lmgym.envs import make
from tests.test_config_validation import one_line_error
from tests.test_prm_reward import ScriptedPRM


def test_score_differences_start_from_the_groups_mean_first_step_score():
    # group 0: first steps 0.6 and 0.4 -> prior 0.5; group 1: one member, prior its own first score
    progress = score_progress([[0.6, 0.8, 0.5], [0.4, 0.7], [0.9, 0.3], []], [0, 0, 1, 1])
    expected = [[0.1, 0.2, -0.3], [-0.1, 0.3], [0.0, -0.6], []]
    for row, want in zip(progress, expected):
        assert row == pytest.approx(want)
    with pytest.raises(ValueError, match="2 score lists but 1 group ids"):
        score_progress([[0.5], [0.5]], [0])


def test_each_token_gets_its_own_steps_value():
    values = torch.tensor([[0.0, 2.0, 0.0, 3.0, 0.0], [0.0, 0.0, 5.0, 0.0, 0.0]])
    ends = torch.tensor([[0, 1, 0, 1, 0], [0, 0, 1, 0, 0]])
    assert spread_over_steps(values, ends).tolist() == [[2.0, 2.0, 3.0, 3.0, 0.0], [5.0, 5.0, 5.0, 0.0, 0.0]]


# A: 6 tokens, steps end at 1, 3, 5, scores 0.6, 0.8, 0.5, correct (env reward 1);
# B: 5 tokens (padded to 6), steps end at 2, 4, scores 0.4, 0.7, wrong (env reward 0). One group.
# Differences (prior 0.5): A 0.1, 0.2, -0.3; B -0.1, 0.3; their mean 0.04.
SCORES = [[0.6, 0.8, 0.5], [0.4, 0.7]]


def scripted_batch(tiny_policy, tmp_path, **overrides):
    config = GRPOConfig(prm_weight=0.5, prm_credit="progress", progress=False, output_dir=str(tmp_path / "run"),
                        **overrides)
    algo = GRPO(tiny_policy, make("Arithmetic-v0"), config, prm=ScriptedPRM(SCORES))
    trajs = [Trajectory([5, 6], [1, 2, 3, 4, 5, 6], [-1.0] * 6, [1] * 6, reward=1.0, step_rewards=[0.0, 0.0, 1.0],
                        step_ends=[1, 3, 5], group_id=0),
             Trajectory([5, 6], [1, 2, 3, 4, 5], [-1.0] * 5, [1] * 5, reward=0.0, step_rewards=[0.0, 0.0],
                        step_ends=[2, 4], group_id=0)]
    metrics = weigh_rewards(trajs, algo.prm, algo.config)
    return algo, trajs, metrics, collate(trajs, algo.pad_id, "cpu", algo.token_fields)


def test_grpo_progress_advantages_by_hand_centred(tiny_policy, tmp_path):
    algo, trajs, metrics, batch = scripted_batch(tiny_policy, tmp_path, scale_by_std=False)
    # paid: 0.5 x each difference at its step's last token; the episode's PRM reward telescopes to 0.5 (s_T - 0.5)
    assert trajs[0].token_data["prm_rewards"] == pytest.approx([0, 0.05, 0, 0.1, 0, -0.15])
    assert trajs[0].shaping["prm"] == pytest.approx(0.0) and trajs[1].shaping["prm"] == pytest.approx(0.1)
    assert metrics["prm_progress"] == pytest.approx((0.1 + 0.2 + 0.3 + 0.1 + 0.3) / 5)
    # outcome centred: +-0.5; credit centred: A 0.06, 0.16, -0.34; B -0.14, 0.26, times the weight 0.5
    expected = torch.tensor([[0.53, 0.53, 0.58, 0.58, 0.33, 0.33],
                             [-0.57, -0.57, -0.57, -0.37, -0.37, 0.0]])  # B's 6th column is padding (masked)
    assert torch.allclose(algo.advantages(batch), expected, atol=1e-6)


def test_grpo_progress_advantages_by_hand_normalised(tiny_policy, tmp_path):
    algo, _, _, batch = scripted_batch(tiny_policy, tmp_path)
    std = math.sqrt((0.06 ** 2 + 0.16 ** 2 + 0.34 ** 2 + 0.14 ** 2 + 0.26 ** 2) / 4) + 1e-4  # unbiased, + eps
    out = 0.5 / (math.sqrt(0.5) + 1e-4)  # outcome rewards 1, 0: centred +-0.5, unbiased std sqrt(0.5)
    credit = [0.06, 0.16, -0.34, -0.14, 0.26]
    a = [out + 0.5 * c / std for c in credit[:3]]
    b = [-out + 0.5 * c / std for c in credit[3:]]
    expected = torch.tensor([[a[0], a[0], a[1], a[1], a[2], a[2]], [b[0], b[0], b[0], b[1], b[1], 0.0]])
    assert torch.allclose(algo.advantages(batch), expected, atol=1e-5)
    direct = progress_advantages(batch[PRM_REWARDS], batch[STEP_ENDS], batch.group_ids,
                                 torch.tensor([1.0, 0.0]), 0.5)
    assert torch.allclose(direct * batch.loss_mask, expected, atol=1e-5)


def test_progress_switches_are_checked(tiny_policy):
    assert "prm_weight must be <= 1 with prm_credit 'progress'" in one_line_error(
        GRPOConfig, prm_weight=1.5, prm_credit="progress")
    assert "prm_credit must be one of score, progress" in one_line_error(GRPOConfig, prm_credit="sum")
    with pytest.raises(ValueError, match="prm credit must be one of score, progress"):
        add_prm_rewards([], ScriptedPRM(), 0.5, "sum")
    with pytest.raises(ValueError, match="weight must be > 0"):
        progress_advantages(torch.zeros(1, 1), torch.ones(1, 1), torch.zeros(1), torch.zeros(1), 0.0)
