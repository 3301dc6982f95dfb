"""Loss aggregation is the same with 1 or 4 micro-batches per optimizer step: loss value and gradients."""
import pytest
import torch

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.buffers import Trajectory
from lmgym.envs import make
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)


def fresh_policy():
    tok = build_tiny_tokenizer()
    return HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")


def uneven_batch(policy):
    """8 trajectories of lengths 1..8 (so the aggregations differ), one env-injected token in two of them."""
    prompt = policy.format_prompt("hello")
    gens = policy.sample([prompt], n=8, max_new_tokens=8, generator=torch.Generator().manual_seed(1))[0]
    trajs = []
    for i, g in enumerate(gens):
        n = i + 1
        ids = (g.completion_ids * 8)[:n]
        mask = [0 if (i in (4, 6) and k == 1) else 1 for k in range(n)]
        logprobs = [lp if m else 0.0 for lp, m in zip((g.logprobs * 8)[:n], mask)]
        trajs.append(Trajectory(g.prompt_ids, ids, logprobs, mask, reward=float(i % 3), group_id=i // 4))
    return trajs


def step(aggregation, micro_batch_size):
    policy = fresh_policy()
    config = GRPOConfig(loss_aggregation=aggregation, micro_batch_size=micro_batch_size, max_grad_norm=0.0,
                        kl_coeff=0.0, samples_per_prompt=4, max_new_tokens=8, loss_length_normalizer=10,
                        progress=False)
    algo = GRPO(policy, make("ToyDigits-v0"), config)
    trajs = uneven_batch(policy)
    algo.prepare(trajs)
    totals = algo.update_step(trajs)  # gradients stay in .grad after the step
    return totals["loss"], [p.grad.clone() for p in policy.parameters()]


@pytest.mark.parametrize("aggregation", ["token_mean", "sequence_mean", "constant"])
def test_same_loss_and_gradients_with_gradient_accumulation(aggregation):
    loss_1, grads_1 = step(aggregation, micro_batch_size=8)   # one micro-batch
    loss_4, grads_4 = step(aggregation, micro_batch_size=2)   # four micro-batches
    assert loss_1 == pytest.approx(loss_4, rel=1e-5, abs=1e-7)
    assert any(g.abs().sum() > 0 for g in grads_1)
    for a, b in zip(grads_1, grads_4):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-7)


def test_aggregations_differ_on_uneven_lengths():
    losses = {agg: step(agg, 8)[0] for agg in ("token_mean", "sequence_mean", "constant")}
    assert len({round(v, 8) for v in losses.values()}) == 3, losses


def test_length_bucketing_orders_micro_batches_by_length():
    from lmgym.algorithms.base import by_length
    from lmgym.buffers import Trajectory

    trajs = [Trajectory([1] * p, [2] * c, [0.0] * c, [1] * c, 0.0) for p, c in [(3, 9), (1, 1), (2, 4), (5, 0)]]
    assert [len(t.prompt_ids) + len(t.completion_ids) for t in by_length(trajs)] == [2, 5, 6, 12]
