"""The verifier refreshed on the policy's own samples: the schedule (which iterations, which samples, which
labels), real optimizer steps of a tiny PRM, and a tiny dense-reward GRPO run with the refresh on."""
import pytest
import torch

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.algorithms.prm.refresh import VerifierRefresh, VerifierRefreshConfig, labelled
from lmgym.algorithms.prm.reward import PRM_REWARDS, STEP_ENDS
from lmgym.algorithms.prm.step_credit import progress_advantages
from lmgym.buffers import Trajectory, collate
from lmgym.buffers.outcome import EpisodeOutcome
from lmgym.envs import make
from lmgym.policies.prm import ProcessRewardModel
from tests.test_config_validation import one_line_error
from tests.test_prm_reward import ScriptedPRM, SpyGRPO, small
from tests.tiers import slow


def sample(first_token, correct, step_ends=(1, 3)):
    n = step_ends[-1] + 1
    return Trajectory([7, 8], list(range(first_token, first_token + n)), [-1.0] * n, [1] * n, reward=float(correct),
                      step_rewards=[0.0] * (len(step_ends) - 1) + [float(correct)], step_ends=list(step_ends),
                      outcome=EpisodeOutcome(correct=correct))


class SpyRefresh(VerifierRefresh):
    """Records each refresh's iteration and the first token of every sample it trained on."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.trained = []

    def train(self, items, iteration):
        self.trained.append((iteration, [x.ids[2] for x in items]))
        return {"verifier_loss": 0.0}


def test_refresh_trains_every_n_iterations_on_the_last_n_iterations_samples(tiny_policy, tmp_path):
    prm = ProcessRewardModel.from_policy(tiny_policy)
    refresh = SpyRefresh(prm, VerifierRefreshConfig(every=2), output_dir=str(tmp_path / "v"))
    metrics = [refresh.observe([sample(10 * i + 1, True), sample(10 * i + 2, False)], i) for i in range(5)]
    # iterations 0-based: refreshes after iterations 1 and 3, on iterations {0, 1} and {2, 3}; iteration 4 waits
    assert refresh.trained == [(1, [1, 2, 11, 12]), (3, [21, 22, 31, 32])]
    assert [bool(m) for m in metrics] == [False, True, False, True, False]
    assert list(refresh.window) == [4]
    off = SpyRefresh(prm, VerifierRefreshConfig(every=0), output_dir=str(tmp_path / "w"))
    assert [off.observe([sample(1, True)], i) for i in range(3)] == [{}, {}, {}] and off.trained == []


def test_labels_are_the_env_verdict_in_the_samples_own_token_ids():
    t = sample(4, True, step_ends=(0, 2, 3))
    steps = labelled(t, "outcome_steps")
    assert steps.ids == [7, 8, 4, 5, 6, 7] and steps.positions == [2, 4, 5] and steps.labels == [1.0, 1.0, 1.0]
    last = labelled(sample(4, False, step_ends=(0, 2, 3)), "outcome")
    assert last.positions == [5] and last.labels == [0.0]
    assert labelled(Trajectory([7], [], [], [], reward=0.0), "outcome") is None


def test_a_refresh_takes_real_optimizer_steps_and_leaves_the_rl_rng_alone(tiny_policy, tmp_path):
    prm = ProcessRewardModel.from_policy(tiny_policy)
    before = [p.detach().clone() for p in prm.parameters()]
    refresh = VerifierRefresh(prm, VerifierRefreshConfig(every=1, steps=3, samples_per_step=2, learning_rate=1e-2),
                              output_dir=str(tmp_path / "v"))
    torch.manual_seed(123)
    state = torch.get_rng_state()
    metrics = refresh.observe([sample(1, True), sample(2, False), sample(3, False)], 0)
    assert torch.equal(torch.get_rng_state(), state)  # the verifier's Trainer seeded torch inside a fork
    assert refresh.trainer.iteration == 3 and refresh.refreshed_at == [0] and not prm.training
    assert metrics["verifier_samples"] == 3 and metrics["verifier_positive_fraction"] == pytest.approx(1 / 3)
    assert any(not torch.equal(a, b) for a, b in zip(before, prm.parameters()))
    trainer = refresh.trainer
    refresh.observe([sample(4, True), sample(5, False)], 1)
    assert refresh.trainer is trainer and trainer.iteration == 6 and len(trainer.items) == 2  # items swapped


def test_refresh_config_is_checked(tiny_policy, tmp_path):
    assert "labels must be one of outcome, outcome_steps" in one_line_error(VerifierRefreshConfig, labels="mc")
    message = one_line_error(GRPO, tiny_policy, make("Arithmetic-v0"),
                             GRPOConfig(refresh={"every": 2}, progress=False, output_dir=str(tmp_path / "r")))
    assert "refresh.every" in message and "no PRM" in message
    with pytest.raises(TypeError, match="needs a ProcessRewardModel"):
        GRPO(tiny_policy, make("Arithmetic-v0"), GRPOConfig(refresh={"every": 2}, prm_weight=0.5, progress=False,
                                                            output_dir=str(tmp_path / "s")), prm=ScriptedPRM())


@slow
def test_tiny_dense_grpo_with_a_refreshed_verifier_trains_policy_and_verifier(tiny_policy, tmp_path):
    prm = ProcessRewardModel.from_policy(tiny_policy)
    policy_before = [p.detach().clone() for p in tiny_policy.parameters()]
    prm_before = [p.detach().clone() for p in prm.parameters()]
    config = small(GRPOConfig, tmp_path, prm_weight=0.5, prm_credit="progress",
                   refresh=dict(every=1, steps=1, samples_per_step=4, learning_rate=1e-2))
    algo = SpyGRPO(tiny_policy, make("Arithmetic-v0", mode="stepwise", max_steps=3), config, prm=prm)
    rows = algo.train()
    assert algo.verifier_refresh.refreshed_at == [0, 1]
    assert all("verifier_loss" in r and "prm_progress" in r for r in rows[-2:])
    assert any(not torch.equal(a, b) for a, b in zip(policy_before, tiny_policy.parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(prm_before, prm.parameters()))
    batch = collate(algo.prepared, algo.pad_id, "cpu", algo.token_fields)
    expected = progress_advantages(batch[PRM_REWARDS], batch[STEP_ENDS], batch.group_ids,
                                   batch.rewards - batch[PRM_REWARDS].sum(1), 0.5) * batch.loss_mask
    assert torch.allclose(batch.advantages, expected, atol=1e-5)
    # the refreshed verifier's weights come back from the checkpoint (GRPO.extra_state)
    reloaded = GRPO(tiny_policy, make("Arithmetic-v0", mode="stepwise", max_steps=3), config,
                    prm=ProcessRewardModel.from_policy(tiny_policy))
    reloaded.resume_from(tmp_path / "run")
    for a, b in zip(prm.parameters(), reloaded.prm.parameters()):
        assert torch.equal(a, b)
