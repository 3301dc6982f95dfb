"""Every config field has one line of help, `--help` shows it with the default the script will use, and
the docs' config-reference tables are what scripts/config_reference.py generates from the dataclasses."""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import re
from pathlib import Path

import pytest

from lmgym.algorithms import (
    DAPOConfig,
    DPOConfig,
    DrGRPOConfig,
    GRPOConfig,
    MCTSSearchConfig,
    PPOConfig,
    PRMConfig,
    ReinforceStableConfig,
    RLConfig,
    RLOOConfig,
    SFTConfig,
)
from lmgym.core.dotted_names import settings_of
from lmgym.training.cli import add_config_arguments
from lmgym.training.config import field_help

ROOT = Path(__file__).resolve().parents[1]
ALL_CONFIGS = (RLConfig, GRPOConfig, DrGRPOConfig, DAPOConfig, RLOOConfig, PPOConfig, ReinforceStableConfig,
               MCTSSearchConfig, PRMConfig, SFTConfig, DPOConfig)


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def flat(text: str) -> str:
    return " ".join(text.split())


def flag_help(text: str, flag: str) -> str:
    """The help of `--flag` in flattened --help output (up to the next flag)."""
    name, metavar = re.escape(flag), re.escape(flag.upper())
    match = re.search(rf"(?:^| )--{name}(?:, --no-{name})?(?: {metavar})* (.*?)(?= --[a-z]| [a-zA-Z' ]+:$|$)", text)
    assert match, flag
    return match.group(1)


@pytest.fixture
def wide(monkeypatch):
    monkeypatch.setenv("COLUMNS", "2000")  # argparse wraps at the terminal width; one line per flag here


@pytest.mark.parametrize("cls", ALL_CONFIGS, ids=lambda c: c.__name__)
def test_every_field_has_one_line_of_help(cls):
    for f in dataclasses.fields(cls):
        text = field_help(cls, f.name)
        assert text and "\n" not in text and len(text) < 120, (cls.__name__, f.name, text)


@pytest.mark.parametrize("cls", ALL_CONFIGS, ids=lambda c: c.__name__)
def test_help_lists_every_field_with_its_text_and_default(cls, wide):
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, cls, {"seed": 1234567})
    text = flat(parser.format_help())
    settings = settings_of(cls)  # the fields, a nested config's fields dotted in its place
    assert {n.partition(".")[0] for n in settings} == {f.name for f in dataclasses.fields(cls)}
    for name, setting in settings.items():
        default = 1234567 if name == "seed" else setting.default
        assert f"{flat(setting.help)} (default {default})" in flag_help(text, name), name


def test_nested_fields_are_dotted_flags_with_the_nested_help_and_the_outer_default(wide):
    from lmgym.search.mcts import MCTSConfig

    parser = argparse.ArgumentParser()
    add_config_arguments(parser, MCTSSearchConfig, {"mcts": {"simulations": 77}})
    text = flat(parser.format_help())
    assert flag_help(text, "mcts.simulations").endswith(f"{field_help(MCTSConfig, 'simulations')} (default 77)")
    assert flag_help(text, "mcts.evaluation").endswith("(default rollout)")  # MCTSSearchConfig's, not MCTSConfig's
    assert "MCTSSearchConfig.mcts (MCTSConfig) fields:" in text
    assert "--mcts " not in text and "--mcts_simulations" not in text  # no flag for the whole, old names hidden


@pytest.mark.parametrize("script, cls", [("quickstart.py", GRPOConfig), ("grpo_gsm8k.py", GRPOConfig),
                                         ("ppo_gsm8k.py", PPOConfig)])
def test_the_example_scripts_help_describes_every_field(script, cls, wide):
    text = flat(load(ROOT / "examples" / script).build_parser().format_help())
    for f in dataclasses.fields(cls):
        assert flat(field_help(cls, f.name)) in text, (script, f.name)
    assert "TRL's name for --samples_per_prompt" in text  # --num_generations


def test_quickstart_help_shows_the_presets_values_not_the_dataclass_defaults(wide):
    quickstart = load(ROOT / "examples" / "quickstart.py")
    text = flat(quickstart.build_parser().format_help())

    def line(flag: str) -> str:
        return flag_help(text, flag)

    cpu, gpu = quickstart.PRESETS["cpu"], quickstart.PRESETS["gpu"]
    assert line("train_iterations").endswith(f"(default: cpu {cpu['train_iterations']}, gpu "
                                             f"{gpu['train_iterations']})")
    assert "(default 100)" not in line("train_iterations")  # GRPOConfig's own default
    assert line("learning_rate").endswith(f"(default {cpu['learning_rate']})")  # the same in both presets
    assert line("output_dir").endswith("(default: cpu runs/quickstart-cpu, gpu runs/quickstart-gpu)")
    assert line("top_p").endswith("(default 1.0)")  # not in any preset: the dataclass default


def test_the_reference_tables_are_generated_from_the_dataclasses():
    generator = load(ROOT / "scripts" / "config_reference.py")
    page = generator.TARGET.read_text(encoding="utf-8")
    assert generator.render(page) == page, "out of date: python scripts/config_reference.py"
    for cls in ALL_CONFIGS:
        assert f"**{cls.__name__}**" in page
    for f in dataclasses.fields(PPOConfig):
        if f.name in ("gamma", "value_model", "train_iterations"):
            assert f"| `{f.name}` |" in page and field_help(PPOConfig, f.name).replace("|", "\\|") in page
    assert "| `num_generations` | `samples_per_prompt` | same |" in page
    assert "| `num_iterations` | `update_epochs` | same: TRL's mu" in page
    assert "| `generation_batch_size` | refused; nearest: `prompts_per_iteration` | different:" in page


def test_the_reference_check_notices_a_stale_page():
    generator = load(ROOT / "scripts" / "config_reference.py")
    page = generator.TARGET.read_text(encoding="utf-8")
    stale = page.replace("| `train_iterations` | int | `100` |", "| `train_iterations` | int | `99` |")
    assert stale != page and generator.render(stale) == page
