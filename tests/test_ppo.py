"""PPO: clipped policy loss (low/high, dual clip), value loss, explained variance, one forward pass."""
import math

import pytest
import torch

from lmgym.algorithms import PPO, PPOConfig
from lmgym.algorithms.advantages import explained_variance
from lmgym.algorithms.losses import clipped_policy_loss, clipped_value_loss
from lmgym.buffers import ADVANTAGES, OLD_VALUES, REF_LOGPROBS, RETURNS, Batch, Trajectory, collate
from lmgym.envs import make
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)


def ppo(policy, tmp_path, **overrides):
    values = dict(train_iterations=1, prompts_per_iteration=2, samples_per_prompt=4, max_new_tokens=8,
                  micro_batch_size=8, minibatch_size=0, update_epochs=1, learning_rate=1e-2, kl_coeff=0.0,
                  eval_at_start=False, progress=False, output_dir=str(tmp_path / "run"))
    values.update(overrides)
    return PPO(policy, make("ToyDigits-v0"), PPOConfig(**values))


def fixed_batch(policy, n=8):
    prompt = policy.format_prompt("hello")
    gens = policy.sample([prompt], n=n, max_new_tokens=6, generator=torch.Generator().manual_seed(0))[0]
    return [Trajectory(g.prompt_ids, g.completion_ids, g.logprobs, [1] * len(g.completion_ids),
                       reward=float(i % 3) / 2, group_id=i) for i, g in enumerate(gens)]


def policy_grad(ratio, adv, clip_low=0.2, clip_high=0.2, dual_clip=0.0):
    logprobs = torch.log(torch.tensor(ratio)).requires_grad_(True)
    loss, clipped = clipped_policy_loss(logprobs, torch.zeros(len(ratio)), torch.tensor(adv), clip_low, clip_high,
                                        dual_clip)
    loss.sum().backward()
    return loss.detach(), logprobs.grad, clipped


def test_gradient_vanishes_outside_the_clip_range_on_the_right_side():
    #        A>0 above | A>0 inside | A>0 below | A<0 below | A<0 inside | A<0 above
    ratio = [1.5, 1.1, 0.5, 0.5, 0.9, 1.5]
    adv = [1.0, 1.0, 1.0, -1.0, -1.0, -1.0]
    loss, grad, clipped = policy_grad(ratio, adv)
    assert grad[0] == 0 and grad[3] == 0                  # the clipped sides
    assert torch.all(grad[[1, 2, 4, 5]] != 0)             # inside, or the pessimistic side (never clipped)
    assert clipped.tolist() == [True, False, False, True, False, False]
    assert torch.allclose(loss, torch.tensor([-1.2, -1.1, -0.5, 0.8, 0.9, 1.5]))


def test_separate_low_and_high_clip():
    # clip-higher (0.2, 0.28): ratio 1.25 with A>0 still learns, 0.79 with A<0 is clipped at 0.8
    _, grad, _ = policy_grad([1.25, 1.3, 0.79, 0.81], [1.0, 1.0, -1.0, -1.0], 0.2, 0.28)
    assert grad[0] != 0 and grad[1] == 0 and grad[2] == 0 and grad[3] != 0
    _, grad, _ = policy_grad([1.25], [1.0], 0.2, 0.2)
    assert grad[0] == 0


def test_dual_clip_bounds_negative_advantages():
    # A = -1, c = 3: a ratio of 5 would cost 5; dual clip caps it at -c * A = 3 with no gradient
    loss, grad, clipped = policy_grad([5.0, 2.0, 5.0], [-1.0, -1.0, 2.0], dual_clip=3.0)
    assert torch.allclose(loss, torch.tensor([3.0, 2.0, -2.4]))
    assert grad[0] == 0 and grad[1] != 0 and grad[2] == 0  # positive A: ordinary clip at 1.2
    assert clipped.tolist() == [True, False, True]
    loss, grad, _ = policy_grad([5.0], [-1.0])
    assert loss.item() == pytest.approx(5.0) and grad[0] != 0  # without dual clip


def test_ppo_loss_uses_clipped_policy_and_value_terms(tiny_policy, tmp_path):
    algo = ppo(tiny_policy, tmp_path, clip_low=0.2, clip_high=0.2, value_clip=0.2, value_coeff=0.5)
    logprobs = torch.log(torch.tensor([[1.5, 1.1], [0.5, 0.9]])).requires_grad_(True)
    values = torch.tensor([[0.5, 0.1], [0.0, 0.0]], requires_grad=True)
    z = torch.zeros(2, 2)
    batch = Batch(input_ids=torch.zeros(2, 3, dtype=torch.long), attention_mask=torch.ones(2, 3, dtype=torch.long),
                  completion_positions=torch.tensor([[1, 2], [1, 2]]), loss_mask=torch.ones(2, 2), old_logprobs=z,
                  token_rewards=z,
                  rewards=torch.zeros(2), group_ids=torch.arange(2), iterations=torch.zeros(2, dtype=torch.long),
                  fields={ADVANTAGES.name: torch.tensor([[1.0, 1.0], [-1.0, -1.0]]), OLD_VALUES.name: z,
                          RETURNS.name: torch.ones(2, 2)})
    terms = algo.loss(batch, logprobs, torch.zeros(2, 2), values)
    assert set(terms) == {"policy", "value"}
    sum(t.sum() for t in terms.values()).backward()
    assert logprobs.grad[0, 0] == 0 and logprobs.grad[1, 0] == 0 and torch.all(logprobs.grad[:, 1] != 0)
    # value 0.5 moved past old 0 + 0.2: clipped loss 0.5 * (0.2 - 1)^2 dominates, no gradient
    assert terms["value"][0, 0].item() == pytest.approx(0.5 * 0.5 * 0.8 ** 2)
    assert values.grad[0, 0] == 0 and values.grad[0, 1] != 0


def test_clipped_value_loss_hand_values():
    values = torch.tensor([0.5, 0.1, -0.5], requires_grad=True)
    loss, clipped = clipped_value_loss(values, torch.zeros(3), torch.ones(3), clip=0.2)
    assert torch.allclose(loss, torch.tensor([0.32, 0.405, 1.125]))  # 0.5*0.8^2, 0.5*0.9^2, 0.5*1.5^2
    assert clipped.tolist() == [True, False, False]
    loss, _ = clipped_value_loss(values, torch.zeros(3), torch.ones(3), clip=0.0)
    assert torch.allclose(loss, torch.tensor([0.125, 0.405, 1.125]))


def test_explained_variance_hand_values():
    returns = torch.tensor([[1.0, 2.0, 3.0, 4.0, 100.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 1.0, 0.0]])  # the last position is not a sampled token
    assert explained_variance(returns, returns, mask) == pytest.approx(1.0)
    assert explained_variance(torch.full_like(returns, 2.5), returns, mask) == pytest.approx(0.0)
    # residuals +-0.5: Var = 0.25; Var(returns) = 1.25 -> 1 - 0.2 = 0.8
    values = torch.tensor([[0.5, 2.5, 2.5, 4.5, 0.0]])
    assert explained_variance(values, returns, mask) == pytest.approx(0.8)
    assert explained_variance(-returns, returns, mask) == pytest.approx(-3.0)  # 1 - Var(2R)/Var(R)
    assert math.isnan(explained_variance(values, torch.ones_like(returns), mask))


@slow
def test_value_loss_falls_when_fitting_a_fixed_batch(tiny_policy, tmp_path):
    algo = ppo(tiny_policy, tmp_path, value_clip=0.0, learning_rate=1e-3, value_learning_rate=3e-3)
    trajs = fixed_batch(tiny_policy)
    algo.prepare(trajs)
    assert all(len(OLD_VALUES.get(t)) == len(t.completion_ids) for t in trajs)
    losses = [algo.update_step(trajs)["value"] for _ in range(10)]
    assert all(b < a for a, b in zip(losses[:6], losses[1:6])), losses  # falls step after step
    assert losses[-1] < 0.25 * losses[0], losses


def test_values_come_from_the_same_backbone_pass(tiny_policy, tmp_path):
    algo = ppo(tiny_policy, tmp_path)
    trajs = fixed_batch(tiny_policy)
    algo.prepare(trajs)
    calls = []
    backbone, _ = tiny_policy.backbone_and_head()
    handle = backbone.register_forward_hook(lambda *args: calls.append(1))
    before = algo.value_model.linear.weight.detach().clone()
    algo.update_step(trajs)
    handle.remove()
    assert len(calls) == 1  # one micro-batch, one backbone pass for log-probs and values
    assert not torch.equal(before, algo.value_model.linear.weight)


def test_separate_critic_trains_and_is_checkpointed(tiny_policy, tmp_path):
    algo = ppo(tiny_policy, tmp_path, value_model="copy")
    assert not algo.value_model.shares_policy_backbone
    trajs = fixed_batch(tiny_policy)
    algo.prepare(trajs)
    before = [p.detach().clone() for p in algo.value_model.backbone.parameters()]
    algo.update_step(trajs)  # the zero-initialised head passes no gradient to the backbone yet
    algo.update_step(trajs)
    assert any(not torch.equal(a, b) for a, b in zip(before, algo.value_model.backbone.parameters()))
    folder = algo.save(tmp_path / "ckpt")
    restored = ppo(tiny_policy, tmp_path, value_model="copy")
    restored.load(folder)
    for a, b in zip(algo.value_model.state_dict().values(), restored.value_model.state_dict().values()):
        assert torch.equal(a, b)


def test_kl_penalty_is_paid_per_token_in_the_reward(tiny_policy, tmp_path):
    algo = ppo(tiny_policy, tmp_path, kl_coeff=0.1, kl_in_reward=True)
    with torch.no_grad():
        for p in algo.ref_policy.model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    trajs = fixed_batch(tiny_policy)
    algo.prepare(trajs)
    batch = collate(trajs, algo.pad_id)
    for i, t in enumerate(trajs):
        kl = 0.1 * (torch.tensor(t.logprobs) - torch.tensor(REF_LOGPROBS.get(t)))
        expected = -kl
        expected[-1] += t.env_reward
        assert torch.allclose(batch.token_rewards[i, :len(t.completion_ids)], expected, atol=1e-5)
        assert t.reward == pytest.approx(t.env_reward - float(kl.sum()), abs=1e-5)
        assert t.env_reward == float(i % 3) / 2 and t.shaping["kl_penalty"] == pytest.approx(-float(kl.sum()), abs=1e-5)


@slow
def test_ppo_train_logs_its_metrics(tiny_policy, tmp_path):
    rows = ppo(tiny_policy, tmp_path, train_iterations=1, kl_coeff=0.05).train()
    for key in ("reward_mean", "reward_std", "train_accuracy", "kl", "entropy", "clip_fraction", "approx_kl",
                "loss_value", "value_mean", "completion_length", "tokens_per_second", "zero_variance_groups",
                "time_sample", "time_score", "time_reference", "time_values", "time_advantages", "time_update"):
        assert key in rows[-1], key


def test_invalid_ppo_config():
    from lmgym.training import ConfigError

    with pytest.raises(ConfigError, match="dual_clip must be 0 or > 1"):
        PPOConfig(dual_clip=0.5)
    with pytest.raises(ConfigError, match="lam must be in"):
        PPOConfig(lam=1.5)


@slow
def test_ppo_gsm8k_example_runs_and_resumes(shared_data, tmp_path):
    import importlib.util
    from pathlib import Path

    from lmgym.policies import build_tiny_model, build_tiny_tokenizer

    data = shared_data / "gsm8k" / "train.jsonl"
    if not data.is_file():
        pytest.skip(f"{data} is not present")
    model_dir = tmp_path / "tiny"
    tok = build_tiny_tokenizer()
    build_tiny_model(tok).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    script = Path(__file__).resolve().parents[1] / "examples" / "ppo_gsm8k.py"
    spec = importlib.util.spec_from_file_location("ppo_gsm8k", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    common = ["--data_path", str(data), "--model", str(model_dir), "--prompts_per_iteration", "2",
              "--max_new_tokens", "8", "--eval_episodes", "2", "--minibatch_size", "0", "--no-progress",
              "--output_dir", str(tmp_path / "run"), "--value_model", "copy"]
    rows = module.main(common + ["--train_iterations", "1"])
    assert rows[-1]["iteration"] == 1 and "eval_accuracy" in rows[-1] and "loss_value" in rows[-1]
    rows = module.main(common + ["--train_iterations", "2", "--resume"])
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    assert (tmp_path / "run" / "model" / "config.json").is_file()


def test_entropy_bonus_has_gradients_only_when_asked(tiny_policy, tmp_path):
    trajs = fixed_batch(tiny_policy)
    for coeff in (0.0, 0.01):
        algo = ppo(tiny_policy, tmp_path, entropy_coeff=coeff)
        algo.prepare(trajs)
        outputs = algo.forward(collate(trajs, algo.pad_id, fields=algo.token_fields))
        assert outputs["entropy"].requires_grad == (coeff > 0)
        assert outputs["values"].shape == outputs["logprobs"].shape
        assert ("entropy" in algo.loss(collate(trajs, algo.pad_id, fields=algo.token_fields), **outputs)) == (
            coeff > 0)


def test_exploding_ratio_gives_finite_gradients():
    from lmgym.algorithms.losses import clipped_policy_loss

    logprobs = torch.tensor([-1.0, -1.0, -2.0], requires_grad=True)
    old = torch.tensor([-150.0, -150.0, -2.0])  # ratios of e^149 would overflow float32
    loss, clipped = clipped_policy_loss(logprobs, old, torch.tensor([1.0, -1.0, 1.0]), 0.2, 0.2)
    loss.sum().backward()
    assert torch.isfinite(loss).all() and torch.isfinite(logprobs.grad).all()
    assert logprobs.grad[0] == 0 and clipped[0]  # positive advantage above the clip range: no gradient
    assert logprobs.grad[2] != 0                 # an ordinary token still learns
