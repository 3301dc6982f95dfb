"""A TRL config stays in TRL's names: the generation batch (prompts per iteration) derived as TRL derives it,
TRL's max_steps with num_iterations, reward_weights, max_prompt_length, mask_truncated_completions,
log_completions and report_to in Python, YAML and flags; and a data set given to the trainer (positionally or
as train_dataset) wrapped in Dataset-v0, or refused when the trainer is built."""
from __future__ import annotations

import argparse

import pytest
import torch

from lmgym.algorithms import GRPO, GRPOConfig
from lmgym.training import load_config
from lmgym.training.cli import add_config_arguments, config_from_arguments
from tests.test_config_validation import one_line_error as one_line
from tests.tiers import slow

ROWS = [{"prompt": "Name a color.", "answer": "red"}, {"prompt": "Name a fruit.", "answer": "fig"},
        {"prompt": "Name a sum.", "answer": "4"}, {"prompt": "Name a tree.", "answer": "oak"}]
TRL_BATCH = {"num_generations": 4, "per_device_train_batch_size": 4, "gradient_accumulation_steps": 2, "max_steps": 2}


def vowels(completions, **kwargs):
    """TRL's signature: one reward per completion."""
    return [float(sum(c.count(v) for v in "aeiou")) for c in completions]


def length(completions, **kwargs):
    return [float(len(c)) for c in completions]


def flags(cls: type, argv: list[str]):
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, cls)
    return config_from_arguments(cls, parser.parse_args(argv))


def small(tmp_path, **trl) -> GRPOConfig:
    """A TRL-named config with our names only for what a CPU test needs."""
    return GRPOConfig.from_trl(**trl, max_completion_length=4, learning_rate=1e-2, output_dir=str(tmp_path / "run"),
                               disable_tqdm=True, seed=0, eval_at_start=False)


def params(policy) -> list[torch.Tensor]:
    return [p.detach().clone() for p in policy.model.parameters()]


def changed(before: list[torch.Tensor], policy) -> bool:
    return any(not torch.equal(a, b) for a, b in zip(before, policy.model.parameters()))


@slow
def test_the_issues_trl_config_builds_and_trains_two_iterations(tiny_policy, tmp_path):
    config = small(tmp_path, **TRL_BATCH)
    # 4 per device x 2 accumulation x 1 process = 8 completions, 4 a prompt: 2 prompts, one optimizer step
    assert (config.prompts_per_iteration, config.samples_per_prompt, config.micro_batch_size) == (2, 4, 4)
    assert (config.minibatch_size, config.optimizer_steps_per_iteration(), config.train_iterations) == (8, 1, 2)
    before = params(tiny_policy)
    rows = GRPO(tiny_policy, ROWS, config, reward_funcs=[vowels]).train()
    assert [row["iteration"] for row in rows] == [1, 2]
    assert all(row["trained_trajectories"] == 8 for row in rows)
    assert changed(before, tiny_policy)


def test_the_prompts_per_iteration_follow_the_world_size(monkeypatch, tmp_path):
    path = tmp_path / "trl.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in TRL_BATCH.items()))
    argv = [part for k, v in TRL_BATCH.items() for part in (f"--{k}", str(v))]
    for world, prompts in (("1", 2), ("2", 4)):  # 4 x 2 x world completions, 4 a prompt
        monkeypatch.setenv("WORLD_SIZE", world)
        built = [GRPOConfig.from_trl(**TRL_BATCH), load_config(GRPOConfig, path), flags(GRPOConfig, argv)]
        assert {(c.prompts_per_iteration, c.minibatch_size, c.train_iterations) for c in built} == {
            (prompts, 8 * int(world), 2)}


def test_num_iterations_makes_max_steps_count_twice_per_generation_batch():
    config = GRPOConfig.from_trl(**{**TRL_BATCH, "max_steps": 6}, num_iterations=2)
    assert (config.update_epochs, config.optimizer_steps_per_iteration(), config.train_iterations) == (2, 2, 3)
    assert "which does not divide 5" in one_line(GRPOConfig.from_trl, **{**TRL_BATCH, "max_steps": 5},
                                                 num_iterations=2)


@pytest.mark.parametrize("world, values, fragment", [
    ("1", {"num_generations": 3, "per_device_train_batch_size": 4, "gradient_accumulation_steps": 2},
     "TRL's generation batch, per_device_train_batch_size 4 x gradient_accumulation_steps 2 x processes 1 = 8 "
     "completions, must be divisible by num_generations (3)"),
    ("2", {"num_generations": 4, "per_device_train_batch_size": 2},
     "= 4 completions, makes 1 prompts of 4, which do not split evenly over the 2 processes"),
])
def test_a_generation_batch_that_does_not_divide_is_one_line(monkeypatch, tmp_path, world, values, fragment):
    monkeypatch.setenv("WORLD_SIZE", world)
    path = tmp_path / "bad.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in values.items()))
    for message in (one_line(GRPOConfig.from_trl, **values), one_line(load_config, GRPOConfig, path)):
        assert fragment in message and "set prompts_per_iteration" in message, message


def test_prompts_per_iteration_given_in_the_same_or_a_later_layer_wins(tmp_path):
    assert GRPOConfig.from_trl(**TRL_BATCH, prompts_per_iteration=4).prompts_per_iteration == 4
    path = tmp_path / "c.yaml"
    path.write_text("per_device_train_batch_size: 4\nnum_generations: 2\n")
    assert load_config(GRPOConfig, path).prompts_per_iteration == 2
    assert load_config(GRPOConfig, path, {"prompts_per_iteration": 3}).prompts_per_iteration == 3
    assert load_config(GRPOConfig, path, defaults={"prompts_per_iteration": 3}).prompts_per_iteration == 2
    assert GRPOConfig.from_trl(micro_batch_size=4).prompts_per_iteration == 16  # our names: no derivation


def test_the_other_trl_names_in_python_yaml_and_flags(tmp_path):
    trl = {"reward_weights": [1.0, 0.5], "max_prompt_length": 12, "log_completions": True,
           "mask_truncated_completions": True, "report_to": ["none"], "epsilon": 0.3,
           "epsilon_high": 0.28, "loss_type": "grpo", "scale_rewards": "none", "num_iterations": 1}
    ours = {"reward_weights": (1.0, 0.5), "max_prompt_length": 12, "log_completions": True,
            "mask_truncated_completions": True, "report_to": (), "clip_low": 0.3,
            "clip_high": 0.28, "loss_aggregation": "sequence_mean", "scale_by_std": False, "update_epochs": 1}
    path = tmp_path / "trl.yaml"
    path.write_text("reward_weights: [1.0, 0.5]\nmax_prompt_length: 12\nlog_completions: true\n"
                    "mask_truncated_completions: true\nreport_to: none\nepsilon: 0.3\n"
                    "epsilon_high: 0.28\nloss_type: grpo\nscale_rewards: none\nnum_iterations: 1\n")
    argv = ["--reward_weights", "1", "0.5", "--max_prompt_length", "12", "--log_completions",
            "--mask_truncated_completions", "--report_to", "none", "--epsilon", "0.3",
            "--epsilon_high", "0.28", "--loss_type", "grpo", "--scale_rewards", "none", "--num_iterations", "1"]
    assert GRPOConfig.from_trl(**trl) == load_config(GRPOConfig, path) == flags(GRPOConfig, argv) == GRPOConfig(**ours)


def test_report_to_names(monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    assert GRPOConfig.from_trl(report_to="none").report_to == ()
    # TRL's other trackers are logged to (training/trackers/; tests/test_trackers.py), named in any case, once each
    assert GRPOConfig(report_to=("TensorBoard", "tensorboard", "mlflow")).report_to == ("tensorboard", "mlflow")
    assert "report_to must be names from wandb, tensorboard, mlflow, trackio, none (unknown: comet)" in one_line(
        GRPOConfig.from_trl, report_to="comet")
    assert "'none' alone" in one_line(GRPOConfig, report_to=("none", "wandb"))
    assert GRPOConfig(wandb="offline").report_to == ("wandb",)  # the wandb field on: listed, so both agree
    monkeypatch.setenv("WANDB_MODE", "offline")
    config = GRPOConfig.from_trl(report_to="wandb")
    assert (config.wandb, config.report_to) == ("offline", ("wandb",))
    assert GRPOConfig(**config.to_dict()) == config  # the resolved pair rebuilds as it is


@slow
def test_log_completions_appends_each_iterations_table(tiny_policy, tmp_path):
    import json

    config = small(tmp_path, **TRL_BATCH, log_completions=True, reward_weights=[1.0, 0.5])
    GRPO(tiny_policy, ROWS, config, reward_funcs=[vowels, length]).train()
    rows = [json.loads(line) for line in (tmp_path / "run" / "completions.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows] == [1] * 8 + [2] * 8  # 2 prompts x 4 completions an iteration
    for row in rows:
        assert set(row["rewards"]) == {"vowels", "length"} and "Name a" in row["prompt"]
        weighted = row["rewards"]["vowels"] + 0.5 * row["rewards"]["length"]
        assert abs(row["reward"] - weighted) < 1e-6 and isinstance(row["completion"], str)
    GRPO(tiny_policy, ROWS, small(tmp_path, **TRL_BATCH), reward_funcs=[vowels]).train()  # a new run, same folder
    assert not (tmp_path / "run" / "completions.jsonl").exists()  # the table is logged only when asked for ...
    assert list((tmp_path / "run").glob("completions.*.bak"))  # ... and the earlier run's was moved aside


@slow
def test_a_dataset_positionally_and_as_train_dataset_trains(tiny_policy, tmp_path):
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_list(ROWS)
    for n, build in enumerate((
            lambda config: GRPO(tiny_policy, dataset, config, reward_funcs=[vowels, length]),
            lambda config: GRPO(tiny_policy, train_dataset=dataset, config=config, reward_funcs=vowels,
                                eval_dataset=ROWS[:2]))):
        config = small(tmp_path / str(n), **{**TRL_BATCH, "max_steps": 1}, eval_episodes=2)
        trainer = build(config)
        assert type(trainer.env).__name__ == "DatasetEnv" and trainer.env.rows is dataset
        before = params(tiny_policy)
        [row] = trainer.train()
        assert row["trained_trajectories"] == 8 and changed(before, tiny_policy)
    assert trainer.eval_env.num_problems == 2 and "eval_accuracy" in row


def test_reward_weights_weigh_the_reward_functions_in_order(tiny_policy, tmp_path):
    config = small(tmp_path, **TRL_BATCH, reward_weights=[2.0, 0.0])
    trainer = GRPO(tiny_policy, ROWS, config, reward_funcs=[vowels, length])
    assert trainer.env.reward_weights == {"vowels": 2.0, "length": 0.0}
    trainer.env.reset(seed=0)
    assert trainer.env.step("aeiou xyz")[1] == pytest.approx(10.0)  # 2 x 5 vowels + 0 x 9 characters


@pytest.mark.parametrize("make_args, error, message", [
    (lambda: ("gsm8k",), TypeError, "GRPO: env must be an env (lmgym.envs.make(...)), a datasets.Dataset or a list "
                                    "of dicts with a 'prompt' column; got str"),
    (lambda: (42,), TypeError, "GRPO: env must be an env"),
    (lambda: (ROWS,), TypeError, "GRPO: a dataset needs reward_funcs=[fn, ...] (TRL's reward_funcs)"),
    (lambda: ([{"text": "x"}], [vowels]), ValueError, "dataset row 0 has no 'prompt' column; got columns text"),
    (lambda: (ROWS, [vowels, "length"]), ValueError, "GRPO: reward_funcs[1] must be callable; got str"),
    (lambda: (ROWS, [vowels], [1.0, 2.0]), ValueError, "GRPO: reward_weights has 2 weights for 1 reward functions "
                                                       "(vowels); give one per function, in order"),
    (lambda: (None,), TypeError, "GRPO needs something to train on"),
    (lambda: (ROWS, [vowels], (), ROWS), TypeError, "GRPO: pass env or train_dataset, not both"),
    (lambda: ("env", [vowels]), TypeError, "GRPO: reward_funcs score a dataset's completions; an env scores"),
])
def test_a_wrong_object_is_refused_when_the_trainer_is_built(tiny_policy, tmp_path, make_args, error, message):
    from lmgym.envs import make

    given = list(make_args())
    env, reward_funcs, weights, train_dataset = given + [None, None, (), None][len(given):]
    env = make("Dataset-v0", dataset=ROWS, reward_fns=[vowels]) if env == "env" else env
    config = GRPOConfig(samples_per_prompt=2, prompts_per_iteration=2, reward_weights=weights,
                        output_dir=str(tmp_path / "run"), progress=False)
    with pytest.raises(error) as info:
        GRPO(tiny_policy, env, config, reward_funcs=reward_funcs, train_dataset=train_dataset)
    assert str(info.value).startswith(message) and "\n" not in str(info.value), str(info.value)


def test_mask_truncated_completions_trains_on_no_cut_off_episode(tiny_policy, tmp_path):
    """At 2 new tokens the tiny model's completions all hit the cap: masked, no token is trained on; the
    same run unmasked moves the weights."""
    moved = []
    for mask in (True, False):
        state = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}
        config = GRPOConfig.from_trl(**{**TRL_BATCH, "max_steps": 1}, max_completion_length=2,
                                     mask_truncated_completions=mask, learning_rate=1e-2,
                                     output_dir=str(tmp_path / str(mask)), disable_tqdm=True, eval_at_start=False)
        trainer = GRPO(tiny_policy, ROWS, config, reward_funcs=[length])
        before = params(tiny_policy)
        [row] = trainer.train()
        assert row["truncated_fraction"] == 1.0
        moved.append(changed(before, tiny_policy))
        tiny_policy.model.load_state_dict(state)
    assert moved == [False, True]


def test_max_prompt_length_keeps_the_last_prompt_tokens(tiny_policy, tmp_path):
    config = small(tmp_path, **TRL_BATCH, max_prompt_length=3)
    full = small(tmp_path, **TRL_BATCH)
    cut, whole = (GRPO(tiny_policy, ROWS, c, reward_funcs=[vowels]).collect() for c in (config, full))
    assert all(len(t.prompt_ids) == 3 for t in cut) and all(len(t.prompt_ids) > 3 for t in whole)
    assert [t.prompt_ids for t in cut] == [t.prompt_ids[-3:] for t in whole]
