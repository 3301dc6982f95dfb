"""Reward components in training: `reward_combination` sets each episode's reward from its components
(GRPO's advantages and DAPO's dynamic sampling follow), per-component metrics and their plots."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from lmgym.algorithms import DAPO, GRPO, DAPOConfig, GRPOConfig
from lmgym.algorithms.advantages import group_advantages
from lmgym.algorithms.reward_combination import combine_batch_rewards
from lmgym.buffers import ADVANTAGES, Trajectory
from lmgym.evaluation.episode_metrics import component_metrics
from lmgym.training.plots import distribution_panels, draw_metrics, progression_panels
from tests.tiers import slow
from tests.toy_env import DigitsEnv, digit_fraction
from tests.two_ranks import Job


def letter_fraction(completion: str, gold: str, info: dict) -> float:
    return sum(ch.isalpha() for ch in completion) / max(len(completion), 1)


def two_components(**kwargs) -> DigitsEnv:
    """Digits with two reward components; the env's own reward is their sum (weights 1)."""
    return DigitsEnv(reward_fns={"digits": digit_fraction, "letters": letter_fraction}, **kwargs)


def episode(components: dict, reward: float, group: int = 0) -> Trajectory:
    return Trajectory(prompt_ids=[1], completion_ids=[2, 3], logprobs=[0.0, 0.0], completion_mask=[1, 1],
                      reward=reward, group_id=group, info={"reward_components": components})


def one_iteration(tiny_policy, tmp_path, method: str, cls=GRPO, config_cls=GRPOConfig, env=None, eval_env=None,
                  **overrides):
    """Train one iteration; returns (the iteration's trajectories as the buffer keeps them, its metrics row)."""
    values = dict(train_iterations=1, prompts_per_iteration=2, samples_per_prompt=4, max_new_tokens=8,
                  micro_batch_size=8, learning_rate=1e-3, kl_coeff=0.0, eval_at_start=False, progress=False,
                  seed=0, reward_combination=method, eval_episodes=4, output_dir=str(tmp_path / method))
    values.update(overrides)
    algo = cls(tiny_policy, env or two_components(), config_cls(**values), eval_env=eval_env)
    rows = algo.train()
    return list(algo.buffer), rows[-1]


def test_combining_sets_env_reward_reward_and_last_step_reward_and_keeps_shaping():
    a = episode({"x": 1.0, "y": 0.2}, 1.2)
    b = episode({"x": 0.0, "y": 0.4}, 0.4)
    a.add_shaping("overlong_penalty", -0.5)
    combine_batch_rewards([a, b], "uniform")
    assert (a.env_reward, a.reward, *a.step_rewards) == pytest.approx((0.6, 0.1, 0.1))
    assert (b.env_reward, b.reward, *b.step_rewards) == pytest.approx((0.2, 0.2, 0.2))
    assert a.shaping == {"overlong_penalty": -0.5}
    a.reset_run_data()  # dropping the shaping leaves the combined reward
    assert (a.reward, *a.step_rewards) == pytest.approx((0.6, 0.6))
    combine_batch_rewards([a, b], "uniform")  # a second combination of the same batch changes nothing
    assert (a.env_reward, b.env_reward) == pytest.approx((0.6, 0.2))


def component_batch() -> list[Trajectory]:
    """Six episodes with three components, one not applicable (None) once."""
    values = [(1.0, 0.2, 0.5), (0.0, 0.4, None), (1.0, 0.6, 0.1), (0.0, 0.8, 0.9), (0.5, 0.1, 0.3), (1.0, 0.9, 0.0)]
    return [episode(dict(zip(("a", "b", "c"), v)), 0.0, group=i // 2) for i, v in enumerate(values)]


def combine_on_rank(rank: int, world: int, port: int, out_dir: str) -> None:
    """One rank of a gloo group: rank 0 holds 2 of the batch's episodes, rank 1 the other 4."""
    import torch.distributed as td

    from tests.distributed_worker import join_gloo

    join_gloo(rank, world, port)
    mine = component_batch()[:2] if rank == 0 else component_batch()[2:]
    combine_batch_rewards(mine, "pca")
    (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps([t.env_reward for t in mine]))
    td.destroy_process_group()


TWO_RANK_JOBS = (Job("reward_combination", combine_on_rank),)  # the session's one two-rank launch (tests/two_ranks.py)


def test_ranks_combine_over_the_whole_batch_exactly_as_one_process(two_rank_jobs):
    out = two_rank_jobs.folder("reward_combination")
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    single = component_batch()
    combine_batch_rewards(single, "pca")
    assert ranks[0] + ranks[1] == [t.env_reward for t in single]  # bit for bit
    alone = component_batch()[:2]
    combine_batch_rewards(alone, "pca", across_ranks=False)  # rank 0's share alone would be another combination
    assert [t.env_reward for t in alone] != ranks[0]


def test_env_leaves_rewards_alone_and_other_methods_need_components():
    a = episode({"x": 1.0}, 7.0)
    combine_batch_rewards([a], "env")
    assert a.reward == a.env_reward == 7.0
    plain = Trajectory(prompt_ids=[1], completion_ids=[2], logprobs=[0.0], completion_mask=[1], reward=1.0)
    with pytest.raises(ValueError, match=r"reward_combination='std' needs info\['reward_components'\]"):
        combine_batch_rewards([a, plain], "std")
    with pytest.raises(ValueError, match="'x' must be a number or None"):
        combine_batch_rewards([episode({"x": "high"}, 0.0)], "uniform")


@slow
def test_std_combination_changes_grpo_advantages_as_its_weights_say(tiny_policy, tmp_path):
    env_run, _ = one_iteration(tiny_policy, tmp_path, "env")
    from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    fresh = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")  # the same start as tiny_policy
    std_run, _ = one_iteration(fresh, tmp_path, "std")
    components = [[t.info["reward_components"][n] for n in ("digits", "letters")] for t in std_run]
    assert components == [[t.info["reward_components"][n] for n in ("digits", "letters")] for t in env_run]
    matrix = np.array(components)
    assert matrix.std(0).min() > 0  # both components vary in this batch
    groups = torch.tensor([t.group_id for t in std_run])

    env_rewards = matrix.sum(1)  # "env": the env's weighted sum (weights 1), as before
    assert [t.env_reward for t in env_run] == pytest.approx(env_rewards)
    expected = group_advantages(torch.tensor(env_rewards, dtype=torch.float), groups)
    assert [ADVANTAGES.get(t)[0] for t in env_run] == pytest.approx(expected.tolist(), abs=1e-5)

    weights = matrix.std(0) / matrix.std(0).sum()
    std_rewards = matrix @ weights
    assert [t.env_reward for t in std_run] == pytest.approx(std_rewards)
    assert [t.reward for t in std_run] == pytest.approx(std_rewards)
    assert [t.step_rewards[-1] for t in std_run] == pytest.approx(std_rewards)
    expected_std = group_advantages(torch.tensor(std_rewards, dtype=torch.float), groups)
    assert [ADVANTAGES.get(t)[0] for t in std_run] == pytest.approx(expected_std.tolist(), abs=1e-5)
    assert not np.allclose(expected_std, expected, atol=1e-3)


@slow
def test_dapo_dynamic_sampling_judges_groups_by_the_combined_reward(tiny_policy, tmp_path):
    # digits + (1 - digits): the env's sum is 1 for every episode, so no group has signal under "env";
    # PCA of the two (perfectly anti-correlated) components varies wherever the digit fraction does.
    def not_digits(completion, gold, info):
        return 1.0 - digit_fraction(completion, gold, info)

    def env():
        return DigitsEnv(reward_fns={"digits": digit_fraction, "rest": not_digits})

    dapo = dict(cls=DAPO, config_cls=DAPOConfig, overlong_buffer=0, max_refill_rounds=2)
    _, flat = one_iteration(tiny_policy, tmp_path, "env", env=env(), **dapo)
    assert flat["trained_trajectories"] == 0 and flat["refill_rounds"] == 2
    trajectories, combined = one_iteration(tiny_policy, tmp_path, "pca", env=env(), **dapo)
    assert combined["refill_rounds"] == 0 and combined["trained_trajectories"] == 8
    assert len({round(t.env_reward, 6) for t in trajectories}) > 1


def test_component_metrics_are_means_over_applicable_episodes_with_their_values():
    batch = [episode({"mrr": 1.0, "f1": None}, 1.0), episode({"mrr": 0.5, "f1": 0.25}, 0.75),
             episode({"mrr": 0.0, "f1": 0.75}, 0.75)]
    metrics = component_metrics(batch)
    assert metrics["reward_mrr"] == pytest.approx(0.5) and metrics["reward_f1"] == pytest.approx(0.5)
    assert metrics["rewards_mrr"] == [1.0, 0.5, 0.0] and metrics["rewards_f1"] == [None, 0.25, 0.75]
    assert set(metrics) == {"reward_mrr", "reward_f1", "rewards_mrr", "rewards_f1"}
    plain = Trajectory(prompt_ids=[1], completion_ids=[2], logprobs=[0.0], completion_mask=[1], reward=1.0)
    assert component_metrics([plain]) == {}
    with pytest.raises(ValueError, match="'std' would be logged as reward_std"):
        component_metrics([episode({"std": 1.0}, 1.0)])


@slow
@pytest.mark.plots  # reads the run's PNGs (tests/conftest.py)
def test_every_iteration_logs_each_component_and_the_run_folder_has_their_plots(tiny_policy, tmp_path):
    one_iteration(tiny_policy, tmp_path, "uniform", eval_env=two_components(), train_iterations=2, eval_at_start=True)
    run = tmp_path / "uniform"
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [0, 1, 2]
    for row in (rows[0], rows[2]):  # held-out means before and after training
        # metrics.jsonl holds TRL's names (training/metric_names.py): rewards/<fn>/mean, and /std
        assert 0 <= row["eval_rewards/digits/mean"] <= 1 and 0 <= row["eval_rewards/letters/mean"] <= 1
    for row in rows[1:]:
        values = {name: row[f"rewards_{name}"] for name in ("digits", "letters")}
        assert len(values["digits"]) == len(values["letters"]) == 8
        for name in ("digits", "letters"):
            assert row[f"rewards/{name}/mean"] == pytest.approx(np.mean(values[name]), abs=1e-4)
            assert row[f"rewards/{name}/std"] == pytest.approx(np.std(values[name]), abs=1e-4)
        uniform = [(d + s) / 2 for d, s in zip(values["digits"], values["letters"])]
        assert row["rewards"] == pytest.approx(uniform, abs=1e-3)
    for name in ("metrics.png", "reward_components.png", "reward_distribution.png"):
        assert (run / name).stat().st_size > 0, name


def test_evaluate_reports_each_component_mean_over_its_greedy_episodes(tiny_policy):
    from lmgym.episodes.rollout import SamplingSettings, rollout
    from lmgym.evaluation import evaluate
    from lmgym.evaluation.evaluate import episode_starts

    env = two_components()
    result = evaluate(tiny_policy, env, episodes=4, max_new_tokens=6)
    played = rollout(env, tiny_policy, episode_starts(env, 4), 1, SamplingSettings(6, 0.0, 1.0))
    for name in ("digits", "letters"):
        assert result[f"reward_{name}"] == pytest.approx(np.mean([t.info["reward_components"][name] for t in played]))


@slow
def test_the_component_plots_draw_each_component_per_iteration():
    rows = [{"iteration": 1, "reward_mean": 0.5, "reward_mrr": 0.5, "reward_f1": 0.3, "rewards": [0.2, 0.8],
             "rewards_mrr": [0.0, 1.0], "rewards_f1": [0.1, None]},
            {"iteration": 2, "reward_mean": 0.6, "reward_mrr": 1.0, "reward_f1": 0.4, "rewards": [0.5, 0.7],
             "rewards_mrr": [1.0, 1.0], "rewards_f1": [0.3, 0.5]}]
    rows.insert(0, {"iteration": 0, "eval_reward_f1": 0.1})  # the evaluation before training
    rows[-1]["eval_reward_f1"] = 0.6
    progression = {ax.get_title(): ax for ax in draw_metrics(rows, panels=progression_panels(["mrr", "f1"])).axes}
    train, held_out = progression["f1"].get_lines()
    assert list(train.get_xdata()) == [1, 2] and list(train.get_ydata()) == [0.3, 0.4]
    assert list(held_out.get_xdata()) == [0, 2] and list(held_out.get_ydata()) == [0.1, 0.6]
    assert "reward (mean of batch)" in progression
    spread = {ax.get_title(): ax for ax in draw_metrics(rows, panels=distribution_panels(["mrr", "f1"])).axes}
    fraction = spread["fraction of episodes with mrr = 1 per iteration"].get_lines()[0]
    assert list(fraction.get_ydata()) == [0.5, 1.0]  # 0/1 values: the fraction at 1
    assert "f1 distribution per iteration" in spread and "reward distribution per iteration" in spread
    assert math.isclose(progression["mrr"].get_lines()[0].get_ydata()[1], 1.0)


def test_an_unknown_combination_is_a_one_line_config_error():
    from lmgym.algorithms import RLConfig
    from lmgym.training import ConfigError

    with pytest.raises(ConfigError, match=r"^RLConfig.reward_combination must be one of env, uniform, std, pca, l2, "
                                          r"got 'mean'$"):
        RLConfig(reward_combination="mean")
    assert RLConfig().reward_combination == "env"


def test_rag_components_combine_as_documented():
    """RAG-HotpotQA-v0's default components (em, f1, mrr, format, ...) on scripted episodes: uniform
    is the env's own reward (equal weights summing to 1), pca ranks the full-marks episode first and the
    penalised one last, l2 refuses the negative format component."""
    from lmgym.envs import RAGHotpotQAEnv
    from tests.rag_toys import RECORDS, LetterEmbedder, ToyStore

    env = RAGHotpotQAEnv(records=RECORDS, store=ToyStore(), embedder=LetterEmbedder())
    scripts = [["<search>Gustave Eiffel born</search>", "<answer>Dijon</answer>"],   # found and right
               ["<search>Big Ben London</search>", "<answer>Paris</answer>"],          # wrong place, wrong answer
               ["<search></search>", "<answer>Dijon</answer>"],                        # malformed search, right
               ["<search></search>"] * 3 + ["no idea", "still none"]]                  # three violations, no answer
    batch = []
    for group, actions in enumerate(scripts):
        env.reset(options={"index": 0})
        for action in actions:
            _, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        batch.append(episode(info["reward_components"], reward, group))
    assert batch[3].info["reward_components"]["format"] == pytest.approx(-1.5)
    env_rewards = [t.env_reward for t in batch]
    combine_batch_rewards(batch, "uniform")
    assert [t.env_reward for t in batch] == pytest.approx(env_rewards)
    combine_batch_rewards(batch, "pca")
    pca = [t.env_reward for t in batch]
    assert pca[0] == max(pca) and pca[3] == min(pca) and sum(pca) == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError, match="'format' is -1.5; use uniform, std or pca"):
        combine_batch_rewards(batch, "l2")
