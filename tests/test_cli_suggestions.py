"""The examples' flags: no prefix matching, and an unknown flag or config key is one line saying what was meant."""
from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from examples.common import example_parser
from lmgym.algorithms import GRPOConfig, PPOConfig
from lmgym.core.messages import close_names
from lmgym.training import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[1]


def load_script(name: str):
    return importlib.import_module(f"examples.{name}")


@pytest.fixture(scope="module")
def grpo_parser():
    parser = load_script("grpo_gsm8k").build_parser()
    parser.prog = "grpo_gsm8k.py"
    return parser


def refusal(parser, argv: list[str], capsys) -> str:
    """The parser must exit 2 with exactly one line on stderr (argparse's "prog: error: " prefix included)."""
    with pytest.raises(SystemExit) as info:
        parser.parse_args(argv)
    assert info.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) == 1 and captured.out == "", captured.err
    assert lines[0].startswith(f"{parser.prog}: error: "), lines[0]
    return lines[0]


def test_an_abbreviation_is_refused_not_taken_as_the_flag_it_starts(grpo_parser, capsys):
    assert grpo_parser.parse_args(["--learning_rate", "3e-6"]).learning_rate == 3e-6
    assert refusal(grpo_parser, ["--learn", "3e-6"], capsys) == (
        "grpo_gsm8k.py: error: unknown flag --learn (did you mean --learning_rate?)")


def test_lr_is_refused_not_taken_as_lr_scheduler_type(grpo_parser, capsys):
    # both are flags now (lr_scheduler_type is TRL's schedule name): --lr is taken as neither, and both are offered
    line = refusal(grpo_parser, ["--lr", "1e-5"], capsys)
    assert line == "grpo_gsm8k.py: error: unknown flag --lr (did you mean --lr_scheduler_type or --learning_rate?)"


@pytest.mark.parametrize("typed, meant", [("--learning_rat", "--learning_rate"), ("--sead", "--seed"),
                                          ("--samples_per_promt", "--samples_per_prompt"),
                                          ("--learning-rate", "--learning_rate")])
def test_a_typo_suggests_the_close_flag(grpo_parser, capsys, typed, meant):
    line = refusal(grpo_parser, [typed, "1"], capsys)
    assert line.startswith(f"grpo_gsm8k.py: error: unknown flag {typed} (did you mean {meant}"), line


def test_the_equals_form_and_several_unknown_flags_stay_one_line(grpo_parser, capsys):
    line = refusal(grpo_parser, ["--learning_rat=1e-5", "--xyzzy"], capsys)
    assert line == ("grpo_gsm8k.py: error: unknown flag --learning_rat (did you mean --learning_rate?); "
                    "unknown flag --xyzzy")


def test_a_trl_name_says_its_equivalent(capsys):
    sft = load_script("sft").build_parser()  # SFTConfig has no samples_per_prompt, so no --num_generations flag
    sft.prog = "sft.py"
    assert refusal(sft, ["--num_generations", "4"], capsys) == (
        "sft.py: error: unknown flag --num_generations: it is TRL's name for --samples_per_prompt, which sft.py "
        "does not take")
    parser = example_parser(prog="tool")
    parser.add_argument("--kl_coeff", type=float)
    assert refusal(parser, ["--beta", "0.1"], capsys) == (
        "tool: error: unknown flag --beta: it is TRL's name for --kl_coeff; write --kl_coeff")
    assert refusal(parser, ["--generation_batch_size", "64"], capsys).startswith(
        "tool: error: --generation_batch_size means something else here: each iteration generates")


def test_other_errors_are_one_line_too_and_trl_names_with_a_flag_still_work(grpo_parser, capsys):
    assert refusal(grpo_parser, ["--seed", "abc"], capsys) == (
        "grpo_gsm8k.py: error: argument --seed: invalid int value: 'abc'")
    assert grpo_parser.parse_args(["--num_generations", "4"]).num_generations == 4


def test_every_example_parser_refuses_abbreviations():
    for path in sorted((ROOT / "examples").glob("*.py")):
        module = load_script(path.stem)
        if hasattr(module, "build_parser"):
            assert module.build_parser().allow_abbrev is False, path.name


def test_an_unknown_yaml_key_suggests_the_close_field(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("learning_rat: 1e-5\nsampels_per_prompt: 4\n")
    with pytest.raises(ConfigError) as info:
        load_config(GRPOConfig, path)
    assert str(info.value) == (f"{path}: unknown GRPOConfig field(s): learning_rat (did you mean learning_rate?), "
                               f"sampels_per_prompt (did you mean samples_per_prompt?)")
    path.write_text("mcts:\n  simulatons: 4\n")
    from lmgym.algorithms import MCTSSearchConfig
    with pytest.raises(ConfigError, match=r"mcts\.simulatons \(did you mean mcts\.simulations\?\)$"):
        load_config(MCTSSearchConfig, path)


def test_an_unknown_keyword_to_a_config_suggests_the_close_field():
    # lr_scheduler_type is a field too (TRL's schedule name): both are offered
    with pytest.raises(TypeError, match=r"^unknown PPOConfig field\(s\): lr \(did you mean lr_scheduler_type or "
                                        r"learning_rate\?\)$"):
        PPOConfig(lr=1e-5)


def test_close_names_prefers_prefixes_then_initials_then_difflib_and_bounds_its_input():
    known = ["learning_rate", "lr_scheduler", "seed", "samples_per_prompt"]
    assert close_names("learn", known) == ["learning_rate"]
    assert close_names("lr", known)[:2] == ["lr_scheduler", "learning_rate"]
    assert close_names("SEDD", known) == ["seed"]
    assert close_names("x" * 10_000, known) == [] and close_names("", known) == []
