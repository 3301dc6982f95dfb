"""GAE against hand-computed values (gamma 0.9, lambda 0.8), injected tokens skipped."""
import torch

from lmgym.algorithms.advantages import gae
from lmgym.buffers import Trajectory, collate

GAMMA, LAM = 0.9, 0.8
# a three-step episode: rewards r and values V per step; V after the last step is 0
#   delta_2 = 1.0 + 0.9 * 0   - 0.6 = 0.4
#   delta_1 = 0.5 + 0.9 * 0.6 - 0.4 = 0.64
#   delta_0 = 0.0 + 0.9 * 0.4 - 0.2 = 0.16
#   A_2 = 0.4
#   A_1 = 0.64 + 0.9 * 0.8 * 0.4   = 0.928
#   A_0 = 0.16 + 0.9 * 0.8 * 0.928 = 0.82816
#   returns = A + V = [1.02816, 1.328, 1.0]
REWARDS = [0.0, 0.5, 1.0]
VALUES = [0.2, 0.4, 0.6]
ADVANTAGES = [0.82816, 0.928, 0.4]
RETURNS = [1.02816, 1.328, 1.0]


def test_gae_three_steps_hand_values():
    adv, ret = gae(torch.tensor([REWARDS]), torch.tensor([VALUES]), torch.ones(1, 3), GAMMA, LAM)
    assert torch.allclose(adv, torch.tensor([ADVANTAGES]), atol=1e-6)
    assert torch.allclose(ret, torch.tensor([RETURNS]), atol=1e-6)


def test_gae_skips_injected_positions_and_padding():
    # the same three steps with an env-injected token after the first (mask 0, its value and reward
    # ignored) and two padding columns; a second, one-token episode in the same batch
    rewards = torch.tensor([[0.0, 7.0, 0.5, 1.0, 0.0, 0.0],
                            [2.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    values = torch.tensor([[0.2, 99.0, 0.4, 0.6, 5.0, 5.0],
                           [0.5, 9.0, 9.0, 9.0, 9.0, 9.0]])
    mask = torch.tensor([[1.0, 0.0, 1.0, 1.0, 0.0, 0.0],
                         [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    adv, _ = gae(rewards, values, mask, GAMMA, LAM)
    assert torch.allclose(adv[0], torch.tensor([0.82816, 0.0, 0.928, 0.4, 0.0, 0.0]), atol=1e-6)
    assert torch.allclose(adv[1], torch.tensor([1.5, 0, 0, 0, 0, 0]))  # 2.0 - 0.5, nothing after it


def test_step_rewards_land_at_step_ends_through_collate():
    # completion: step 1 = tokens 0-1, injected token 2, step 2 = token 3; rewards 0.5 then 1.0
    t = Trajectory(prompt_ids=[1, 2], completion_ids=[5, 6, 7, 8], logprobs=[-1.0, -1.0, 0.0, -1.0],
                   completion_mask=[1, 1, 0, 1], reward=1.5, step_rewards=[0.5, 1.0], step_ends=[1, 3])
    batch = collate([t], pad_id=0)
    assert batch.token_rewards.tolist() == [[0.0, 0.5, 0.0, 1.0]]
    values = torch.tensor([[0.2, 0.4, 123.0, 0.6]])
    adv, _ = gae(batch.token_rewards, values, batch.loss_mask, GAMMA, LAM)
    # token 0: delta = 0 + 0.9 * 0.4 - 0.2 = 0.16; token 1: delta = 0.5 + 0.9 * 0.6 - 0.4 = 0.64 (skips 2)
    assert torch.allclose(adv, torch.tensor([[0.82816, 0.928, 0.0, 0.4]]), atol=1e-6)
