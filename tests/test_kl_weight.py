"""The KL penalty enters the loss and its gradient with weight beta (`kl_coeff`): a term multiplied by 0 (or by
any other number) while its metric key stays must fail here, for GRPO and REINFORCE-stable."""
import math

import pytest
import torch

from lmgym.algorithms import GRPO, GRPOConfig, ReinforceStable, ReinforceStableConfig
from lmgym.algorithms.kl import kl_estimate
from lmgym.algorithms.losses import masked_mean
from lmgym.buffers import ADVANTAGES, REF_LOGPROBS, Trajectory, collate
from lmgym.envs import make
from tests.test_algorithms import fixed_batch, small_config
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)

ALGORITHMS = [(GRPO, GRPOConfig), (ReinforceStable, ReinforceStableConfig)]
HAND_LOGP = [math.log(0.5), math.log(0.2)]  # the policy's log-probs of two tokens
HAND_REF = [math.log(0.25), math.log(0.4)]  # the reference's


def hand_step(cls, config_cls, beta, policy, tmp_path):
    """One update step on one two-token trajectory whose log-probs are a leaf tensor (HAND_LOGP), reference
    HAND_REF, advantages 0 (the policy term has no gradient): returns (the step's loss terms, d loss / d logp)."""
    algo = cls(policy, make("ToyDigits-v0"), small_config(config_cls, tmp_path, kl_coeff=beta))
    trajectory = Trajectory([1, 2], [3, 4], list(HAND_LOGP), [1, 1], reward=0.0)
    REF_LOGPROBS.set(trajectory, list(HAND_REF))
    ADVANTAGES.set(trajectory, [0.0, 0.0])
    logprobs = torch.tensor([HAND_LOGP], requires_grad=True)
    algo.forward = lambda batch: {"logprobs": logprobs, "entropy": torch.zeros_like(logprobs)}
    totals = algo.update_step([trajectory])
    return totals, logprobs.grad


@pytest.mark.parametrize("cls,config_cls", ALGORITHMS)
@pytest.mark.parametrize("beta", [0.0, 0.1, 0.3])
def test_kl_term_and_gradient_are_beta_times_the_hand_computed_k3(tiny_policy, tmp_path, cls, config_cls, beta):
    # k3 = q/p - 1 - log(q/p): q/p = 0.5 -> ln2 - 0.5; q/p = 2 -> 1 - ln2; token mean 0.25
    # d k3 / d log p = 1 - q/p: 0.5 and -1; the token mean halves them
    totals, grad = hand_step(cls, config_cls, beta, tiny_policy, tmp_path)
    assert totals.get("kl", 0.0) == pytest.approx(beta * 0.25, abs=1e-7)
    assert totals["loss"] == pytest.approx(beta * 0.25, abs=1e-7)  # the policy term is 0 (advantages 0)
    assert grad is not None
    assert torch.allclose(grad, torch.tensor([[beta * 0.25, -beta * 0.5]]), atol=1e-7)


def real_model_gradients(cls, config_cls, beta, tmp_path):
    """Gradients of one update step of the tiny model (fresh, seed 0) on `fixed_batch`, with the reference
    log-probs set 0.2 nats away from the behaviour's; returns (gradients, the step's terms, the batch)."""
    from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    config = small_config(config_cls, tmp_path, kl_coeff=beta, max_grad_norm=0.0, micro_batch_size=8,
                          learning_rate=1e-6)
    algo = cls(policy, make("ToyDigits-v0"), config)
    trajectories = fixed_batch(policy)
    algo.prepare(trajectories)
    for i, t in enumerate(trajectories):
        REF_LOGPROBS.set(t, [lp + (0.2 if (i + j) % 2 else -0.2) for j, lp in enumerate(t.logprobs)])
    totals = algo.update_step(trajectories)
    return [p.grad.clone() for p in policy.parameters() if p.grad is not None], totals, trajectories


@pytest.mark.parametrize("cls,config_cls", ALGORITHMS)
def test_beta_adds_beta_times_the_kl_gradient_on_the_tiny_model(tmp_path, cls, config_cls):
    beta = 0.5
    with_kl, totals, trajectories = real_model_gradients(cls, config_cls, beta, tmp_path / "beta")
    without, totals0, _ = real_model_gradients(cls, config_cls, 0.0, tmp_path / "zero")
    assert totals["policy"] == pytest.approx(totals0["policy"], rel=1e-5, abs=1e-7)
    # the KL alone, differentiated by hand on a third copy of the same model
    from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    batch = collate(trajectories, tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    logprobs, _ = policy.token_logprobs(batch.input_ids, batch.attention_mask, batch.completion_positions)
    kl = masked_mean(kl_estimate(logprobs.float(), batch.ref_logprobs, "k3"), batch.loss_mask)
    assert float(kl.detach()) > 1e-3  # the reference is away from the policy: the term has a gradient
    assert totals["kl"] == pytest.approx(beta * float(kl.detach()), rel=1e-4)
    kl.backward()
    kl_grads = [p.grad for p in policy.parameters() if p.grad is not None]
    assert len(kl_grads) == len(with_kl) == len(without)
    for g_beta, g_zero, g_kl in zip(with_kl, without, kl_grads):
        assert torch.allclose(g_beta - g_zero, beta * g_kl, rtol=1e-3, atol=1e-6)
