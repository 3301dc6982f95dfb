"""Config values from YAML files, flags and code: coerced to the declared type, range-checked, and every
bad value a one-line ConfigError naming the field, the value and (from a file) the file."""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import pytest

from lmgym.algorithms import (
    DAPOConfig,
    DrGRPOConfig,
    GRPOConfig,
    PPOConfig,
    ReinforceStableConfig,
    RLConfig,
    RLOOConfig,
    SFTConfig,
)
from lmgym.training import ConfigError, load_config
from lmgym.training.cli import add_config_arguments, config_from_arguments, run_with_clear_errors
from lmgym.training.config import field_types, read_config_file

ALL_CONFIGS = (RLConfig, GRPOConfig, DrGRPOConfig, DAPOConfig, RLOOConfig, PPOConfig, ReinforceStableConfig)


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def one_line_error(call, *args, **kwargs) -> str:
    """The message of the ConfigError `call` raises; it must be a single line."""
    with pytest.raises(ConfigError) as info:
        call(*args, **kwargs)
    message = str(info.value)
    assert message and "\n" not in message, message
    return message


# --- YAML values read as the declared type --------------------------------------------------------

def test_yaml_scientific_notation_is_read_as_the_float_it_is(tmp_path):
    # PyYAML (YAML 1.1) reads 1e-5 without a dot as the string '1e-5'
    config = load_config(GRPOConfig, write(tmp_path, "learning_rate: 1e-5\nkl_coeff: 4E-2\nweight_decay: 0\n"))
    assert config.learning_rate == 1e-5 and type(config.learning_rate) is float
    assert config.kl_coeff == 0.04 and type(config.weight_decay) is float


def test_yaml_values_are_coerced_to_the_declared_types(tmp_path):
    text = ("seed: '3'\ntrain_iterations: 1.0e+2\ntemperature: 1\nadam_betas: [0.8, '0.9']\n"
            "output_dir: 2024\nkl_estimator: k1\n")
    config = load_config(PPOConfig, write(tmp_path, text))
    assert (config.seed, config.train_iterations) == (3, 100) and type(config.train_iterations) is int
    assert config.temperature == 1.0 and type(config.temperature) is float
    assert config.adam_betas == (0.8, 0.9) and config.output_dir == "2024"


@pytest.mark.parametrize("word, meaning", [("yes", True), ("no", False), ("true", True), ("false", False),
                                           ("on", True), ("off", False), ("1", True), ("0", False),
                                           ("YES", True), ("No", False), ("Off", False), ("TRUE", True)])
def test_quoted_booleans_mean_what_they_say(tmp_path, word, meaning):
    config = load_config(PPOConfig, write(tmp_path, f"kl_in_reward: '{word}'\nbf16: \"{word}\"\n"))
    assert config.kl_in_reward is meaning and config.bf16 is meaning


@pytest.mark.parametrize("value", ["maybe", "", "nope", 2, -1, 0.5, None, [], "2"])
def test_a_non_boolean_is_never_silently_truthy(value):
    message = one_line_error(GRPOConfig, bf16=value)
    assert "GRPOConfig.bf16 expects true or false" in message and repr(value) in message


@pytest.mark.parametrize("name", ["seed", "train_iterations", "eval_every", "minibatch_size"])
def test_booleans_are_not_integers(name):
    assert f"GRPOConfig.{name} expects an integer, got True" in one_line_error(GRPOConfig, **{name: True})


# --- bad YAML values: one line naming the file, the field and the value ---------------------------

@pytest.mark.parametrize("text, fragments", [
    ("temperature: null\n", ["temperature expects a number", "None"]),
    ("temperature:\n", ["temperature expects a number", "None"]),
    ("adam_betas: [0.9]\n", ["adam_betas expects a list of 2 numbers", "[0.9]"]),
    ("adam_betas: 0.9\n", ["adam_betas expects a list of 2 numbers", "0.9"]),
    ("adam_betas: [0.9, x]\n", ["adam_betas expects a list of 2 numbers, each a number", "'x'"]),
    ("adam_betas: [0.9, 1.5]\n", ["adam_betas must be two numbers in [0, 1)", "(0.9, 1.5)"]),
    ("seed: abc\n", ["seed expects an integer", "'abc'"]),
    ("seed: 2.5\n", ["seed expects an integer", "2.5"]),
    ("train_iterations: yes\n", ["train_iterations expects an integer", "True"]),
    ("kl_in_reward: 2\n", ["kl_in_reward expects true or false", "2"]),
    ("bf16: 'maybe'\n", ["bf16 expects true or false", "'maybe'"]),
    ("learning_rate: .nan\n", ["learning_rate expects a finite number", "nan"]),
    ("temperature: .inf\n", ["temperature expects a finite number", "inf"]),
    ("learning_rate: '-inf'\n", ["learning_rate expects a finite number", "'-inf'"]),
    ("learning_rate: 1e999\n", ["learning_rate expects a finite number", "'1e999'"]),
    ("learning_rate: -1e-5\n", ["learning_rate must be > 0", "-1e-05"]),
    ("top_p: 0\n", ["top_p must be in (0, 1]", "0.0"]),
    ("wandb: off\n", ["wandb expects a string (quote it", "False"]),
    ("kl_estimator: k9\n", ["kl_estimator must be one of k1, k2, k3", "'k9'"]),
    ("output_dir: ''\n", ["output_dir must be a folder path", "''"]),
])
def test_bad_yaml_values_are_one_line_errors_naming_file_field_and_value(tmp_path, text, fragments):
    path = write(tmp_path, text)
    message = one_line_error(load_config, GRPOConfig, path)
    assert message.startswith(f"{path}: GRPOConfig."), message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


def test_a_yaml_syntax_error_names_the_file_line_and_column(tmp_path):
    path = write(tmp_path, "learning_rate: 1.0e-5\nadam_betas: [0.9, 0.99\nseed: 1\n")
    message = one_line_error(load_config, GRPOConfig, path)
    assert message.startswith(f"{path}: invalid YAML at line 3, column 5:"), message
    path = write(tmp_path, "seed: 1\n  temperature: 2\n")
    assert f"{path}: invalid YAML at line 2, column" in one_line_error(load_config, GRPOConfig, path)


def test_a_key_given_twice_is_an_error_not_the_last_one_silently(tmp_path):
    path = write(tmp_path, "seed: 1\nlearning_rate: 1e-5\nseed: 2\n")
    assert one_line_error(load_config, GRPOConfig, path) == (
        f"{path}: invalid YAML at line 3, column 1: 'seed' is given twice")
    base = write(tmp_path, "base: &b {x: 1}\nother:\n  <<: *b\n  x: 2\n", "merge.yaml")  # a merge key may be overridden
    assert "unknown GRPOConfig field(s): base, other" in one_line_error(load_config, GRPOConfig, base)


@pytest.mark.parametrize("text, kind", [("- 1\n- 2\n", "list"), ("just a string\n", "str"), ("3\n", "int")])
def test_a_top_level_that_is_not_a_mapping_is_an_error(tmp_path, text, kind):
    path = write(tmp_path, text)
    assert one_line_error(load_config, GRPOConfig, path) == (
        f"{path}: expected a mapping of field: value at the top level, got a {kind}")


def test_an_empty_file_sets_nothing(tmp_path):
    assert load_config(GRPOConfig, write(tmp_path, "# only a comment\n")) == GRPOConfig()


def test_unknown_keys_are_named_even_when_not_strings(tmp_path):
    path = write(tmp_path, "1: 2\nlearning_rat: 0.1\n")
    assert one_line_error(load_config, GRPOConfig, path) == (
        f"{path}: unknown GRPOConfig field(s): 1, learning_rat (did you mean learning_rate?)")


def test_a_config_path_that_is_not_a_readable_file_is_an_error(tmp_path, monkeypatch):
    assert one_line_error(load_config, GRPOConfig, tmp_path) == (
        f"config file {tmp_path} is a directory, not a YAML file")
    missing = tmp_path / "missing.yaml"
    assert one_line_error(load_config, GRPOConfig, missing) == f"config file not found: {missing}"
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"seed: \xff\xfe\n")
    assert one_line_error(load_config, GRPOConfig, binary) == f"config file {binary} is not UTF-8 text"
    assert one_line_error(load_config, GRPOConfig, "") == "config file path is empty"
    locked = write(tmp_path, "seed: 1\n", "locked.yaml")

    def refuse(self, *args, **kwargs):  # the suite may run as root, where chmod 000 does not stop a read
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", refuse)
    assert one_line_error(load_config, GRPOConfig, locked) == f"cannot read config file {locked}: Permission denied"


# --- ranges -----------------------------------------------------------------------------------------

FLOAT_FIELDS = [(cls, name) for cls in ALL_CONFIGS for name, kind in field_types(cls).items() if kind is float]


@pytest.mark.parametrize("cls, name", FLOAT_FIELDS, ids=[f"{c.__name__}.{n}" for c, n in FLOAT_FIELDS])
def test_every_float_field_must_be_finite(cls, name):
    for bad in (math.inf, -math.inf, math.nan, "nan", "inf"):
        message = one_line_error(cls, **{name: bad})
        assert message.startswith(f"{cls.__name__}.{name} expects a finite number"), message


@pytest.mark.parametrize("cls, name, value, fragment", [
    (RLConfig, "train_iterations", 0, "must be a positive integer"),
    (RLConfig, "micro_batch_size", -1, "must be a positive integer"),
    (RLConfig, "keep_checkpoints", 0, "must be a positive integer"),
    (RLConfig, "eval_every", -1, "must be an integer >= 0"),
    (RLConfig, "loss_length_normalizer", -5, "must be an integer >= 0"),
    (RLConfig, "seed", -1, "must be in [0, 2**32)"),
    (RLConfig, "seed", 2**32, "must be in [0, 2**32)"),
    (RLConfig, "learning_rate", 0, "must be > 0"),
    (RLConfig, "weight_decay", -0.1, "must be >= 0"),
    (RLConfig, "adam_betas", (0.9, 1.0), "must be two numbers in [0, 1)"),
    (RLConfig, "adam_betas", (-0.1, 0.9), "must be two numbers in [0, 1)"),
    (RLConfig, "temperature", -0.5, "must be >= 0"),
    (RLConfig, "top_p", 1.5, "must be in (0, 1]"),
    (RLConfig, "kl_coeff", -1, "must be >= 0"),
    (RLConfig, "max_grad_norm", -1, "must be >= 0"),
    (RLConfig, "loss_aggregation", "mean", "must be one of token_mean, sequence_mean, constant"),
    (RLConfig, "wandb", "yes", "must be off, offline or online"),
    (RLConfig, "wandb_project", " ", "must be a name"),
    (GRPOConfig, "samples_per_prompt", 1, "must be >= 2"),
    (GRPOConfig, "clip_low", 1.0, "must be in [0, 1)"),
    (GRPOConfig, "clip_high", -0.1, "must be >= 0"),
    (DAPOConfig, "max_refill_rounds", -1, "must be >= 0"),
    (DAPOConfig, "overlong_buffer", 64, "must be in [0, 64)"),
    (DAPOConfig, "overlong_penalty_factor", -1, "must be >= 0"),
    (PPOConfig, "gamma", 0, "must be in (0, 1]"),
    (PPOConfig, "lam", 1.5, "must be in [0, 1]"),
    (PPOConfig, "clip_low", -0.2, "must be in [0, 1)"),
    (PPOConfig, "clip_high", -0.2, "must be >= 0"),
    (PPOConfig, "dual_clip", 0.5, "must be 0 or > 1"),
    (PPOConfig, "value_clip", -1, "must be >= 0"),
    (PPOConfig, "value_coeff", 0, "must be > 0"),
    (PPOConfig, "entropy_coeff", -0.01, "must be >= 0"),
    (PPOConfig, "value_model", "", "must be shared, copy or a model path"),
    (PPOConfig, "value_learning_rate", -1e-5, "must be >= 0"),
    (ReinforceStableConfig, "gamma", 1.01, "must be in (0, 1]"),
])
def test_out_of_range_values_are_one_line_errors(cls, name, value, fragment):
    message = one_line_error(cls, **{name: value})
    assert message.startswith(f"{cls.__name__}.{name} {fragment}") and "got" in message, message


@pytest.mark.parametrize("cls", ALL_CONFIGS)
def test_the_defaults_are_valid_and_survive_a_round_trip(cls, tmp_path):
    config = cls()
    assert cls(**config.to_dict()) == config


def test_output_dir_must_not_be_or_be_inside_an_existing_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # short relative paths: a message cuts a value past 80 characters (a deep tmp_path)
    file = write(Path("."), "not a folder", "afile")
    assert one_line_error(GRPOConfig, output_dir=str(file)) == (
        f"GRPOConfig.output_dir must be a folder, not an existing file, got {str(file)!r}")
    inside = file / "run"
    assert one_line_error(GRPOConfig, output_dir=str(inside)) == (
        f"GRPOConfig.output_dir must be a folder path, but {file} is a file, got {str(inside)!r}")
    assert "output_dir must be a folder path" in one_line_error(GRPOConfig, output_dir="")
    assert GRPOConfig(output_dir=str(tmp_path)).output_dir == str(tmp_path)  # an existing folder is fine
    assert GRPOConfig(output_dir=str(tmp_path / "new" / "run")).output_dir.endswith("run")


def test_long_bad_values_are_cut_in_the_message():
    message = one_line_error(GRPOConfig, learning_rate="x" * 100_000)
    assert len(message) < 200 and "(100002 characters)" in message


# --- layering and flags -----------------------------------------------------------------------------

def test_defaults_then_file_then_overrides(tmp_path):
    path = write(tmp_path, "learning_rate: 2e-5\nseed: 4\n")
    config = load_config(GRPOConfig, path, {"seed": 5, "top_p": None}, {"learning_rate": 1e-3, "kl_coeff": 0.5})
    assert (config.learning_rate, config.seed, config.kl_coeff, config.top_p) == (2e-5, 5, 0.5, 1.0)


def test_a_range_error_names_the_file_only_when_the_value_came_from_it(tmp_path):
    path = write(tmp_path, "top_p: 2\n")
    assert one_line_error(load_config, GRPOConfig, path).startswith(f"{path}: GRPOConfig.top_p must be in (0, 1]")
    assert one_line_error(load_config, GRPOConfig, path, {"top_p": 3}).startswith("GRPOConfig.top_p must be")
    assert load_config(GRPOConfig, path, {"top_p": 0.5}).top_p == 0.5


def parser_for(cls: type, defaults: dict | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, cls, defaults)
    return parser


def test_flags_parse_as_the_declared_type_and_go_through_the_same_checks(tmp_path):
    defaults = {"kl_coeff": 0, "clip_high": 1}  # ints in a script's defaults do not make the flags ints
    args = parser_for(GRPOConfig, defaults).parse_args(["--kl_coeff", "0.5", "--clip_high", "2.5e-1",
                                                        "--adam_betas", "0.8", "0.95", "--no-bf16"])
    config = config_from_arguments(GRPOConfig, args, defaults)
    assert (config.kl_coeff, config.clip_high, config.adam_betas, config.bf16) == (0.5, 0.25, (0.8, 0.95), False)
    for flags, fragment in [(["--temperature", "inf"], "GRPOConfig.temperature expects a finite number, got inf"),
                            (["--learning_rate", "nan"], "GRPOConfig.learning_rate expects a finite number, got nan"),
                            (["--top_p", "0"], "GRPOConfig.top_p must be in (0, 1], got 0.0"),
                            (["--output_dir", str(write(tmp_path, "x", "f"))], "output_dir must be a folder")]:
        args = parser_for(GRPOConfig).parse_args(flags)
        assert fragment in one_line_error(config_from_arguments, GRPOConfig, args), flags


def test_run_with_clear_errors_turns_config_errors_into_one_line(monkeypatch, capsys):
    monkeypatch.delenv("RLGYM_TRACEBACK", raising=False)

    def parse_then_build():  # a ConfigError raised while the flags are parsed, inside the guarded call
        parser = argparse.ArgumentParser()
        parser.add_argument("--x", action=_RaisingAction)
        parser.parse_args(["--x", "1"])

    with pytest.raises(SystemExit) as info:
        run_with_clear_errors(parse_then_build)
    assert info.value.code == "error: --x is refused"
    with pytest.raises(SystemExit) as info:
        run_with_clear_errors(GRPOConfig, 0, 0)  # GRPOConfig(0, 0): train_iterations=0
    assert info.value.code == "error: GRPOConfig.train_iterations must be a positive integer, got 0"


class _RaisingAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        raise ConfigError("--x\nis refused")


def test_read_config_file_returns_only_what_the_file_sets(tmp_path):
    assert read_config_file(GRPOConfig, write(tmp_path, "seed: '7'\nbf16: 'off'\n")) == {"seed": 7, "bf16": False}


SHIPPED = {"grpo_gsm8k.yaml": (GRPOConfig, "learning_rate", 1e-5),
           "reinforce_stable_gsm8k.yaml": (ReinforceStableConfig, "learning_rate", 1e-5),
           "reflection_gsm8k_sft.yaml": (SFTConfig, "max_length", 768)}


def test_the_shipped_yaml_configs_load_with_their_values_typed():
    folder = Path(__file__).resolve().parents[1] / "examples" / "configs"
    assert sorted(p.name for p in folder.glob("*.yaml")) == sorted(SHIPPED)  # a new file: add it here
    for name, (cls, field, value) in SHIPPED.items():
        config = load_config(cls, folder / name)
        assert getattr(config, field) == value and type(getattr(config, field)) is type(value), name
