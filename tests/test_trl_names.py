"""TRL's config names: accepted where they mean what ours mean at the edges (`from_trl` in Python, YAML,
flags), refused with one line naming ours where they do not; the constructor takes our names only and
refuses TRL's in one line naming the `from_trl` spelling; and each algorithm refuses another algorithm's
config in one line."""
from __future__ import annotations

import argparse

import pytest

from lmgym.algorithms import (
    DAPO,
    PPO,
    RLOO,
    DAPOConfig,
    DrGRPO,
    GRPOConfig,
    PPOConfig,
    ReinforceStableConfig,
    RLOOConfig,
)
from lmgym.training import load_config, trl_names
from lmgym.training.cli import add_config_arguments, config_from_arguments
from lmgym.training.config import read_config_file
from tests.test_config_validation import one_line_error as one_line


def flags(cls: type, argv: list[str], defaults: dict | None = None):
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, cls, defaults)
    return config_from_arguments(cls, parser.parse_args(argv), defaults)


TRL_VALUES = {"num_generations": 4, "beta": 0.1, "epsilon": 0.3, "epsilon_high": 0.28, "loss_type": "dr_grpo",
              "scale_rewards": "none", "max_steps": 7, "eval_steps": 2, "save_steps": 3, "warmup_steps": 5,
              "save_total_limit": 4, "disable_tqdm": True, "num_iterations": 1, "max_completion_length": 48,
              "per_device_train_batch_size": 8, "gradient_accumulation_steps": 8}
OURS = {"samples_per_prompt": 4, "kl_coeff": 0.1, "clip_low": 0.3, "clip_high": 0.28, "loss_aggregation": "constant",
        "scale_by_std": False, "train_iterations": 7, "eval_every": 2, "save_every": 3, "warmup_iterations": 5,
        "keep_checkpoints": 4, "progress": False, "update_epochs": 1, "max_new_tokens": 48, "micro_batch_size": 8,
        "minibatch_size": 64, "prompts_per_iteration": 16}  # 8 x 8 on one process: the whole batch (TRL's
# generation batch, 64 completions of 4 a prompt), one optimizer step


def test_every_same_meaning_alias_is_exercised():
    assert set(TRL_VALUES) == set(trl_names.SAME)  # a new alias: add it to TRL_VALUES and OURS


def test_trl_names_in_python(tmp_path):
    config = GRPOConfig.from_trl(output_dir=str(tmp_path), **TRL_VALUES)
    assert config == GRPOConfig(output_dir=str(tmp_path), **OURS)
    assert type(RLOOConfig.from_trl(num_generations=4)) is RLOOConfig  # each config builds its own class


@pytest.mark.parametrize("name", sorted(TRL_VALUES))
def test_a_trl_name_given_to_the_constructor_names_ours_and_from_trl(name):
    ours = trl_names.SAME[name].ours
    message = one_line(GRPOConfig, **{name: TRL_VALUES[name]})
    assert message == (f"GRPOConfig: {name} is TRL's name for {ours}: pass {ours}=..., or build with "
                       f"GRPOConfig.from_trl({name}=...)")
    with pytest.raises(TypeError):  # as Python's own unexpected-keyword error would be
        GRPOConfig(**{name: TRL_VALUES[name]})


def test_an_unknown_keyword_is_one_line_naming_the_config():
    assert one_line(PPOConfig, learning_rat=1e-5) == (
        "unknown PPOConfig field(s): learning_rat (did you mean learning_rate?)")


def test_trl_names_in_yaml(tmp_path):
    path = tmp_path / "trl.yaml"
    path.write_text("".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}\n" for k, v in TRL_VALUES.items()))
    assert read_config_file(GRPOConfig, path) == OURS
    assert load_config(GRPOConfig, path) == GRPOConfig(**OURS)


def test_trl_names_as_flags():
    argv = [part for k, v in TRL_VALUES.items() for part in (f"--{k}", str(v))]
    assert flags(GRPOConfig, argv) == GRPOConfig(**OURS)


def test_epsilon_sets_both_bounds_unless_the_upper_one_is_given(tmp_path):
    assert (GRPOConfig.from_trl(epsilon=0.3).clip_low, GRPOConfig.from_trl(epsilon=0.3).clip_high) == (0.3, 0.3)
    assert GRPOConfig.from_trl(epsilon=0.3, clip_high=0.28).clip_high == 0.28
    assert DAPOConfig.from_trl(epsilon=0.25, epsilon_high=0.3).clip_high == 0.3
    path = tmp_path / "eps.yaml"
    path.write_text("epsilon: 0.3\n")
    assert flags(GRPOConfig, ["--config", str(path), "--clip_high", "0.28"]).clip_high == 0.28  # flags win


@pytest.mark.parametrize("value, ours", [("group", True), (True, True), ("true", True), ("none", False),
                                         (False, False), ("false", False)])
def test_scale_rewards_values(value, ours):
    assert GRPOConfig.from_trl(scale_rewards=value).scale_by_std is ours


@pytest.mark.parametrize("name, value, fragment", [
    ("scale_rewards", "batch", "scale_rewards 'batch' has no counterpart here: scale_by_std divides"),
    ("loss_type", "bnpo", "loss_type 'bnpo' has no counterpart here: loss_aggregation is token_mean (TRL's dapo)"),
    ("disable_tqdm", "maybe", "disable_tqdm expects true or false, got 'maybe'"),
])
def test_values_without_a_counterpart_are_refused(name, value, fragment):
    assert fragment in one_line(GRPOConfig.from_trl, **{name: value})


@pytest.mark.parametrize("name, ours", [
    ("adam_beta1", ["adam_betas"]),
    ("warmup_ratio", ["warmup_iterations"]),
])
def test_names_meaning_something_else_are_refused_naming_ours(name, ours, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(f"{name}: 2\n")
    messages = [one_line(GRPOConfig, **{name: 2}), one_line(GRPOConfig.from_trl, **{name: 2}),
                one_line(load_config, GRPOConfig, path), one_line(flags, GRPOConfig, [f"--{name}", "2"])]
    assert messages[2].startswith(f"{path}: GRPOConfig: {name} ")
    for message in messages:
        assert f"GRPOConfig: {name} " in message and all(field in message for field in ours), message


def test_trls_batch_names_map_to_their_exact_equivalents(tmp_path, monkeypatch):
    """per_device_train_batch_size, gradient_accumulation_steps, num_iterations, max_completion_length:
    TRL's meaning, in Python, YAML and flags."""
    trl = {"per_device_train_batch_size": 4, "gradient_accumulation_steps": 2, "num_iterations": 3,
           "max_completion_length": 96}
    # TRL's generation batch: 4 x 2 completions, GRPOConfig's 8 samples a prompt: one prompt an iteration
    ours = {"micro_batch_size": 4, "minibatch_size": 8, "update_epochs": 3, "max_new_tokens": 96,
            "prompts_per_iteration": 1}
    path = tmp_path / "trl.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in trl.items()))
    assert GRPOConfig.from_trl(**trl) == load_config(GRPOConfig, path) == GRPOConfig(**ours)
    assert flags(GRPOConfig, [part for k, v in trl.items() for part in (f"--{k}", str(v))]) == GRPOConfig(**ours)
    # minibatch_size counts trajectories over all processes: G micro-batches on each of WORLD_SIZE processes
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert GRPOConfig.from_trl(gradient_accumulation_steps=2, micro_batch_size=4).minibatch_size == 16
    assert GRPOConfig.from_trl(gradient_accumulation_steps=2).minibatch_size == 2 * 32 * 2  # the default micro-batch


def test_num_iterations_has_trls_meaning_where_it_used_to_be_ours():
    # this toolkit's old num_iterations was the training length; TRL's (passes per batch, mu) is the one kept
    assert ReinforceStableConfig.from_trl(num_iterations=2).update_epochs == 2
    assert "num_iterations is TRL's name for update_epochs" in one_line(ReinforceStableConfig, num_iterations=2)


@pytest.mark.parametrize("values, fragment", [
    ({"gradient_accumulation_steps": 0}, "gradient_accumulation_steps must be a positive integer; got 0"),
    ({"gradient_accumulation_steps": 2, "minibatch_size": 8}, "gradient_accumulation_steps and minibatch_size are "
                                                              "both given"),
])
def test_bad_gradient_accumulation_is_one_line(values, fragment):
    assert fragment in one_line(GRPOConfig.from_trl, **values)


def test_max_episode_steps_is_refused_the_env_holds_the_one_step_limit(tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text("max_episode_steps: 4\n")
    messages = [one_line(GRPOConfig, max_episode_steps=4), one_line(GRPOConfig.from_trl, max_episode_steps=4),
                one_line(load_config, PPOConfig, path),
                one_line(flags, ReinforceStableConfig, ["--max_episode_steps", "4"])]
    assert messages[2].startswith(f"{path}: PPOConfig: max_episode_steps is gone")
    for message in messages:
        assert "max_episode_steps is gone" in message and "max_steps" in message and "TimeLimit" in message


def test_step_counted_names_are_refused_where_an_iteration_has_no_fixed_step_count():
    from lmgym.training import TrainerConfig

    assert "may make several; set train_iterations" in one_line(TrainerConfig.from_trl, max_steps=5)
    assert TrainerConfig.from_trl(warmup_steps=3).warmup_iterations == 3  # an alias that counts steps on both sides


def test_an_alias_and_its_field_together_are_refused(tmp_path):
    assert one_line(GRPOConfig.from_trl, beta=0.1, kl_coeff=0.2) == (
        "beta and kl_coeff are both given (beta is TRL's name for kl_coeff)")
    path = tmp_path / "both.yaml"
    path.write_text("num_generations: 4\nsamples_per_prompt: 8\n")
    assert one_line(load_config, GRPOConfig, path).startswith(f"{path}: num_generations and samples_per_prompt")
    assert "are both given" in one_line(flags, GRPOConfig, ["--beta", "0.1", "--kl_coeff", "0.2"])


def test_an_alias_for_a_field_the_config_lacks_is_refused():
    for build in (ReinforceStableConfig.from_trl, ReinforceStableConfig):
        message = one_line(build, epsilon=0.2)
        assert message == "ReinforceStableConfig has no clip_low, which TRL's epsilon stands for"


def test_step_counted_names_only_when_an_iteration_is_one_optimizer_step(tmp_path):
    assert GRPOConfig.from_trl(max_steps=5).train_iterations == 5  # defaults: one epoch, the whole batch per step
    message = one_line(GRPOConfig.from_trl, max_steps=5, update_epochs=2)
    assert message == ("GRPOConfig: TRL's max_steps counts optimizer steps, but here an iteration makes 2 "
                       "(update_epochs x minibatches), which does not divide 5; set train_iterations, counted in "
                       "iterations")
    assert GRPOConfig.from_trl(max_steps=6, update_epochs=2).train_iterations == 3  # 2 steps an iteration
    # PPOConfig's defaults: 4 epochs x 4 minibatches
    assert "makes 16 (update_epochs x minibatches)" in one_line(PPOConfig.from_trl, save_steps=5)
    path = tmp_path / "steps.yaml"
    path.write_text("max_steps: 5\nminibatch_size: 32\n")  # 16 x 8 = 128 trajectories: 4 optimizer steps
    assert "makes 4" in one_line(load_config, GRPOConfig, path)
    assert load_config(GRPOConfig, path, {"train_iterations": 5}).train_iterations == 5  # ours wins: no check
    assert flags(GRPOConfig, ["--max_steps", "3"]).train_iterations == 3


def test_other_algorithms_configs_are_refused_in_one_line():
    with pytest.raises(TypeError) as info:
        PPO(None, None, GRPOConfig())  # checked before the policy or a value model is touched
    assert str(info.value) == "PPO takes a PPOConfig, got a GRPOConfig (it has no gamma, lam, dual_clip)"
    with pytest.raises(TypeError, match=r"^DAPO takes a DAPOConfig, got a GRPOConfig \(it has no max_refill_rounds"):
        DAPO(None, None, GRPOConfig())
    with pytest.raises(TypeError, match=r"^RLOO takes a RLOOConfig, got a dict$"):
        RLOO(None, None, {"kl_coeff": 0.0})


def test_a_config_with_every_field_an_algorithm_reads_is_accepted(tiny_policy):
    from lmgym.envs import make
    from tests.toy_env import DigitsEnv  # noqa: F401  (registers ToyDigits-v0)

    # RLOOConfig and DrGRPOConfig only change GRPOConfig's defaults, so a GRPOConfig fits both
    assert DrGRPO(tiny_policy, make("ToyDigits-v0"), GRPOConfig(samples_per_prompt=2)).config.scale_by_std is True
    assert isinstance(RLOO(tiny_policy, make("ToyDigits-v0"), RLOOConfig(samples_per_prompt=2)).config, RLOOConfig)


def test_gradient_accumulation_uses_the_micro_batch_size_another_layer_sets(tmp_path):
    """The file says micro_batch_size, the flag says gradient_accumulation_steps: G x the kept micro-batch."""
    path = tmp_path / "c.yaml"
    path.write_text("per_device_train_batch_size: 2\n")
    assert flags(GRPOConfig, ["--config", str(path), "--gradient_accumulation_steps", "4"]).minibatch_size == 8
    defaults = {"micro_batch_size": 1, "samples_per_prompt": 2}
    assert flags(GRPOConfig, ["--gradient_accumulation_steps", "4"], defaults).minibatch_size == 4
    path.write_text("gradient_accumulation_steps: 4\nnum_generations: 4\n")
    assert flags(GRPOConfig, ["--config", str(path), "--micro_batch_size", "3"]).minibatch_size == 12
    assert flags(GRPOConfig, ["--config", str(path), "--minibatch_size", "5"]).minibatch_size == 5  # ours wins
