"""Command-line flags generated from a config dataclass: `--config file.yaml`, then `--field value` overrides
(a nested config's fields as dotted flags: `--mcts.simulations 24`).

Why not `transformers.HfArgumentParser`: it reads the same `metadata["help"]` our fields carry, but it
cannot parse `adam_betas` (a `tuple[float, float]`), reads a YAML file *instead of* the flags rather than
under them (we layer script defaults < `--config` file < flags), builds the dataclass with its own
multi-line errors for bad values, and knows nothing of TRL's names for our fields or of a script's
presets. This module is those few things on top of argparse; the configs stay plain dataclasses, so
`HfArgumentParser(GRPOConfig)` can still be used by anyone who prefers it for the fields it handles.
"""
from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Callable
from typing import Any

from lmgym.core.checked_config import field_help
from lmgym.core.dotted_names import Setting, flatten, settings_of
from lmgym.core.extras import MissingExtraError
from lmgym.envs import make
from lmgym.training import trl_names
from lmgym.training.config import field_types, load_config, nested_fields
from lmgym.training.guards import EXIT_STATUS

FLAG_TYPES = {int: int, float: float, str: str}


def default_text(name: str, default: Any, presets: dict[str, dict[str, Any]] | None = None) -> str:
    """The default shown in --help: `default X`, or `default: cpu X, gpu Y` when `presets` differ on it."""
    if presets and any(name in p for p in presets.values()):
        values = {preset: p.get(name, default) for preset, p in presets.items()}
        if len(set(map(repr, values.values()))) > 1:
            return "default: " + ", ".join(f"{preset} {value}" for preset, value in values.items())
        default = next(iter(values.values()))
    return f"default {default}"


def _add_flag(group, setting: Setting, default: Any, presets: dict[str, dict[str, Any]] | None) -> None:
    """`--<name>` parsing as the setting's declared type, its help text ending with the default."""
    text = f"{setting.help} ({default_text(setting.name, default, presets)})".replace("%", "%%")
    kind, flag = setting.kind, f"--{setting.name}"
    if kind is bool:
        group.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=text)
    elif typing.get_origin(kind) is tuple:
        args = typing.get_args(kind)
        nargs = "*" if args[-1] is Ellipsis else len(args)  # tuple[float, ...]: any number of values
        group.add_argument(flag, type=FLAG_TYPES.get(args[0], str), nargs=nargs, default=None, help=text)
    else:
        group.add_argument(flag, type=FLAG_TYPES.get(kind, str), default=None, help=text)


def old_flat_names(config_class: type) -> list[str]:
    """`mcts_simulations` for each nested field (`mcts.simulations`): flat spellings refused with the dotted one."""
    fields = field_types(config_class)
    return [f"{outer}_{name}" for outer, kind in nested_fields(config_class).items() for name in field_types(kind)
            if f"{outer}_{name}" not in fields]


def add_config_arguments(parser: argparse.ArgumentParser, config_class: type, defaults: dict[str, Any] | None = None,
                         presets: dict[str, dict[str, Any]] | None = None) -> None:
    """One flag per setting (`--learning_rate 1e-5`, `--bf16/--no-bf16`; a nested config's fields dotted:
    `--mcts.simulations 24`) with its help text and the default the script will use (`defaults`, or per
    preset; either may spell a nested config as a mapping or by dotted names), TRL's names for fields,
    and `--config`. Each flag parses as the field's declared type; ranges are checked when the config is
    built. Names that are refused (TRL's with another meaning, old flat `mcts_*` ones) are hidden flags
    that reach `config_from_arguments`, so the refusal is one line naming what to write instead."""
    parser.add_argument("--config", default=None, help="YAML file of config fields (flags override it)")
    defaults = flatten(config_class, defaults or {})
    presets = {preset: flatten(config_class, p) for preset, p in presets.items()} if presets else None
    groups: dict[str, argparse._ArgumentGroup] = {}
    for setting in settings_of(config_class).values():
        outer = setting.name.rpartition(".")[0]
        if outer not in groups:
            title = f"{config_class.__name__}.{outer} ({setting.owner.__name__})" if outer else config_class.__name__
            about = field_help(config_class, outer) if outer and "." not in outer else None  # the nested field's own
            groups[outer] = parser.add_argument_group(f"{title} fields", description=about)
        default = setting.default if setting.default is not dataclasses.MISSING else None
        _add_flag(groups[outer], setting, defaults.get(setting.name, default), presets)
    types = field_types(config_class)
    trl = parser.add_argument_group("TRL's names (same meaning; see docs/configuration.md, \"Coming from TRL\")")
    for name, alias in trl_names.SAME.items():
        if alias.ours in types:
            kind = types[alias.ours] if alias.convert is None else str
            trl.add_argument(f"--{name}", type=FLAG_TYPES.get(kind, str), default=None,
                             help=f"TRL's name for --{alias.ours}" + (f": {alias.note}" if alias.note else ""))
    for name in _refused_names(config_class):  # refused with a line naming ours (hidden from --help)
        parser.add_argument(f"--{name}", nargs="?", const=True, default=None, help=argparse.SUPPRESS)


def _refused_names(config_class: type) -> list[str]:
    return [*trl_names.DIFFERENT, *trl_names.REMOVED, *old_flat_names(config_class)]


def config_from_arguments(config_class: type, args: argparse.Namespace, defaults: dict[str, Any] | None = None):
    """Defaults of the script < the `--config` YAML file < command-line flags (those not None; TRL's
    names translated, those meaning something else refused, `--mcts.simulations` setting `mcts.simulations`)."""
    names = set(settings_of(config_class)) | set(trl_names.SAME) | set(_refused_names(config_class))
    overrides = {k: v for k, v in vars(args).items() if k in names and v is not None}
    return load_config(config_class, getattr(args, "config", None), overrides, defaults)


# ConfigError (a ValueError), data/model/prompt files, unknown env ids, paths that are not what they should be,
# an optional library a feature needs (its extra's pip command)
USER_ERRORS = (ValueError, FileNotFoundError, KeyError, PermissionError, IsADirectoryError, NotADirectoryError,
               MissingExtraError)


def run_with_clear_errors(run: Callable[..., Any], *args: Any) -> Any:
    """Call `run(*args)`; a bad input (config value, missing file or model, unknown env id, malformed row)
    exits with one line `error: ...` instead of a traceback (set RLGYM_TRACEBACK=1 to see it). Ctrl-C exits
    with status 130 and one line: training's "interrupted at iteration N; resume with --resume ..."
    (training/guards.py), or "interrupted" elsewhere.

    Parse the flags inside `run` (`run_with_clear_errors(lambda: run(parser.parse_args(argv)))`) so that
    errors raised while parsing get the same treatment; argparse's own usage errors exit as usual."""
    import os
    import sys

    try:
        return run(*args)
    except USER_ERRORS as err:
        if os.environ.get("RLGYM_TRACEBACK"):
            raise
        sys.exit("error: " + " ".join(str(err).split()))
    except KeyboardInterrupt as err:
        if os.environ.get("RLGYM_TRACEBACK"):
            raise
        print(" ".join(str(err).split()) or "interrupted", file=sys.stderr, flush=True)
        sys.exit(EXIT_STATUS)


def same_file(a: str | None, b: str | None) -> bool:
    """True when two paths name the same file."""
    from pathlib import Path

    return a is not None and b is not None and Path(a).expanduser().resolve() == Path(b).expanduser().resolve()


def print_run_summary(rows: list[dict], run_dir) -> None:
    """Held-out accuracy first -> last evaluation, and where the run folder is."""
    evals = [f"{r['eval_accuracy']:.1%} (iteration {r['iteration']})" for r in rows if "eval_accuracy" in r]
    if evals:
        print("held-out accuracy: " + (f"{evals[0]} -> {evals[-1]}" if len(evals) > 1 else evals[0]))
    print(f"run folder: {run_dir} (metrics.jsonl, metrics.png, checkpoint-N/, model/)")


def train_and_report(algo, resume: bool = False) -> list[dict]:
    """Train (with `resume`, from the newest complete checkpoint <output_dir>/checkpoint-N; `train`
    says which, or that there is none), save the final model as a Hugging Face folder in
    <output_dir>/model (`Trainer.save_model`: weights, tokenizer, chat template, system prompt,
    generation config), and print the held-out accuracy and where the run folder is."""
    from pathlib import Path

    run_dir = Path(algo.config.output_dir)
    rows = algo.train(resume=resume)
    algo.save_model(run_dir / "model")  # every rank calls it (FSDP gathers the shards); rank 0 alone writes
    print_run_summary(rows, run_dir)
    return rows


def gsm8k_train_test(train_path: str | None, test_path: str | None, holdout: int, test_flag: str = "--test_data_path",
                     **env_kwargs: Any):
    """(train env, test env, training rows range or None, a sentence saying where evaluation comes from).

    A separate test file when one is given (and differs from the training file); otherwise the last
    `holdout` training rows (at most half) are held back and never trained on.
    """
    if test_path is not None and not same_file(test_path, train_path):
        train_env = make("GSM8K-v0", data_path=train_path, split="train", **env_kwargs)
        test_env = make("GSM8K-v0", data_path=test_path, split="test", **env_kwargs)
        return train_env, test_env, None, f"evaluating on {test_path} ({test_env.num_problems} problems)"
    if holdout < 1:
        raise ValueError(f"--holdout must be >= 1, got {holdout}")
    rows = make("GSM8K-v0", data_path=train_path, split="train", **env_kwargs).num_problems
    held = min(holdout, rows // 2)
    if held < 1:
        raise ValueError(f"the training data has {rows} row(s), too few to hold any back: pass {test_flag}")
    train_env = make("GSM8K-v0", data_path=train_path, split="train", subset=(0, rows - held), **env_kwargs)
    test_env = make("GSM8K-v0", data_path=train_path, split="train", subset=(rows - held, rows), **env_kwargs)
    return train_env, test_env, (0, rows - held), (
        f"no separate test file: the last {held} of {rows} training rows are held back for evaluation "
        f"(never trained on)")
