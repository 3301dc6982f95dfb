import json

import pytest
import torch

from lmgym.algorithms import GRPO, GRPOConfig, ReinforceStable, ReinforceStableConfig
from lmgym.buffers import Trajectory
from lmgym.envs import make
from lmgym.training import ConfigError, load_config
from tests.tiers import slow
from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)


def small_config(cls, tmp_path, **overrides):
    values = dict(train_iterations=2, prompts_per_iteration=2, samples_per_prompt=4, max_new_tokens=8,
                  eval_episodes=4, output_dir=str(tmp_path / "run"), progress=False, micro_batch_size=4,
                  learning_rate=1e-2, eval_at_start=False)
    values.update(overrides)
    return cls(**values)


def fixed_batch(policy, n=8):
    """Trajectories sampled from the tiny model with hand-set rewards (two groups, mixed rewards)."""
    prompt = policy.format_prompt("hello")
    gens = policy.sample([prompt], n=n, max_new_tokens=6, generator=torch.Generator().manual_seed(0))[0]
    return [Trajectory(g.prompt_ids, g.completion_ids, g.logprobs, [1] * len(g.completion_ids),
                       reward=float(i % 2), group_id=i // 4) for i, g in enumerate(gens)]


def surrogate_loss(algo, trajectories):
    from lmgym.buffers import collate

    batch = collate(trajectories, algo.pad_id)
    with torch.no_grad():
        lp, ent = algo.policy.token_logprobs(batch.input_ids, batch.attention_mask, batch.completion_positions)
        terms = algo.loss(batch, lp, ent)
    return float(sum((t * batch.loss_mask).sum() for t in terms.values()) / batch.loss_mask.sum())


@pytest.mark.parametrize("cls,config_cls", [(GRPO, GRPOConfig), (ReinforceStable, ReinforceStableConfig)])
def test_one_update_changes_parameters_and_lowers_loss(tiny_policy, tmp_path, cls, config_cls):
    config = small_config(config_cls, tmp_path, kl_coeff=0.0, learning_rate=1e-3)
    algo = cls(tiny_policy, make("ToyDigits-v0"), config)
    trajs = fixed_batch(tiny_policy)
    algo.prepare(trajs)
    before_params = [p.detach().clone() for p in tiny_policy.parameters()]
    before = surrogate_loss(algo, trajs)
    algo.update(trajs)
    after = surrogate_loss(algo, trajs)
    changed = sum(not torch.equal(a, b) for a, b in zip(before_params, tiny_policy.parameters()))
    assert changed > 0
    assert after < before - 1e-4, (before, after)


@slow
@pytest.mark.plots  # reads the run's PNGs (tests/conftest.py)
def test_grpo_with_kl_records_metrics_and_writes_run_folder(tiny_policy, tmp_path):
    config = small_config(GRPOConfig, tmp_path, kl_coeff=0.1, eval_at_start=True)
    algo = GRPO(tiny_policy, make("ToyDigits-v0"), config, eval_env=make("ToyDigits-v0"))
    rows = algo.train()
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    for key in ("reward_mean", "kl", "entropy", "clip_fraction", "zero_variance_groups", "tokens_per_second",
                "time_sample", "time_update", "loss_policy", "loss_kl"):
        assert key in rows[1], key
    run = tmp_path / "run"
    assert (run / "metrics.png").stat().st_size > 1000
    assert json.loads((run / "config.json").read_text())["algorithm"] == "GRPO"
    assert (run / "checkpoint-2" / "MANIFEST.json").is_file()


@pytest.mark.parametrize("estimator", ["k1", "k2", "k3"])
def test_the_logged_kl_uses_the_configured_estimator(tiny_policy, tmp_path, estimator):
    from lmgym.algorithms.kl import kl_estimate
    from lmgym.algorithms.losses import masked_mean
    from lmgym.buffers import collate

    config = small_config(GRPOConfig, tmp_path, kl_coeff=0.1, kl_estimator=estimator, micro_batch_size=8)
    algo = GRPO(tiny_policy, make("ToyDigits-v0"), config)
    trajs = fixed_batch(tiny_policy)
    algo.prepare(trajs)
    algo.update_step(trajs)  # the policy moves away from its reference
    batch = collate(trajs, algo.pad_id)
    with torch.no_grad():
        logprobs = algo.forward(batch)["logprobs"]
    expected = {k: float(masked_mean(kl_estimate(logprobs, batch.ref_logprobs, k), batch.loss_mask))
                for k in ("k1", "k2", "k3")}
    assert len({round(v, 6) for v in expected.values()}) == 3  # the estimators tell apart here
    algo.update_step(trajs)
    assert algo._step_metrics["kl"][-1] == pytest.approx(expected[estimator], rel=1e-4, abs=1e-7)


def _metrics_without_timing(row):
    return {k: v for k, v in row.items() if not k.startswith("time_") and k != "tokens_per_second"}


def test_resume_gives_the_same_next_iteration(tmp_path):
    from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer

    def fresh(out, iterations):
        tok = build_tiny_tokenizer()
        policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
        config = small_config(GRPOConfig, tmp_path, train_iterations=iterations, output_dir=str(tmp_path / out),
                              kl_coeff=0.05, ref_sync_every=2, save_every=1)
        return GRPO(policy, make("ToyDigits-v0"), config)

    straight = fresh("straight", 3).train()
    fresh("resumed", 2).train()                    # "interrupted" after iteration 2
    resumed = fresh("resumed", 3).train(resume=True)
    assert [r["iteration"] for r in resumed] == [1, 2, 3]
    assert _metrics_without_timing(resumed[2]) == _metrics_without_timing(straight[2])


def test_invalid_config_values_are_one_line_errors(tmp_path):
    with pytest.raises(ConfigError, match="learning_rate must be > 0"):
        GRPOConfig(learning_rate=0)
    with pytest.raises(ConfigError, match="samples_per_prompt must be >= 2"):
        GRPOConfig(samples_per_prompt=1)
    with pytest.raises(ConfigError, match="kl_estimator must be one of k1, k2, k3, got 'k9'"):
        GRPOConfig(kl_estimator="k9")
    with pytest.raises(ConfigError, match="train_iterations must be a positive integer"):
        ReinforceStableConfig(train_iterations=0)
    yaml_file = tmp_path / "c.yaml"
    yaml_file.write_text("learning_rate: 0.001\nnot_a_field: 3\n")
    with pytest.raises(ConfigError, match="unknown GRPOConfig field"):
        load_config(GRPOConfig, str(yaml_file))
    yaml_file.write_text("learning_rate: 0.001\n")
    assert load_config(GRPOConfig, str(yaml_file), {"seed": 3}).learning_rate == 0.001
    for err in (ConfigError("x"),):
        assert "\n" not in str(err)
