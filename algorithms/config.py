"""Configuration dataclasses and their loading.

Every field is documented. `__post_init__` coerces each value to the field's declared type (YAML and
flags give strings, ints for floats, quoted booleans) and checks its range; `load_config` layers
defaults < a YAML file < overrides. Every bad value is a one-line ConfigError naming the field, the
bad value and, when it came from a file, the file.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KL_ESTIMATORS = ("k1", "k2", "k3")
LOSS_AGGREGATIONS = ("token_mean", "sequence_mean", "constant")
WANDB_MODES = ("off", "offline", "online")
BOOL_WORDS = {"true": True, "yes": True, "on": True, "1": True, "false": False, "no": False, "off": False, "0": False}
MAX_SEED = 2**32  # numpy's legacy seeding and many tools take 32-bit seeds


class ConfigError(ValueError):
    """A configuration value is invalid. The message is one line; `field` names the field when there is one."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(" ".join(str(message).split()))
        self.field = field


def shown(value: Any, limit: int = 80) -> str:
    """`repr(value)`, cut to about `limit` characters (a message stays one readable line)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit - 20]}... ({len(text)} characters)"


class _Mismatch(Exception):
    """A value does not fit a declared type; the argument says what was expected."""


def _to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in BOOL_WORDS:
        return BOOL_WORDS[value.strip().lower()]
    raise _Mismatch("true or false (or yes/no, on/off, 1/0)")


def _to_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, str)):
        raise _Mismatch("a number")
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise _Mismatch("a number") from None
    if not math.isfinite(number):
        raise _Mismatch("a finite number")
    return number


def _to_int(value: Any) -> int:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    try:
        number = _to_float(value)  # 1e3 or 2.0: an integer written as a float
    except _Mismatch:
        raise _Mismatch("an integer") from None
    if not number.is_integer():
        raise _Mismatch("an integer")
    return int(number)


def _to_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):  # YAML reads unquoted yes/no/on/off/true/false as booleans
        raise _Mismatch("a string (quote it: YAML reads unquoted yes/no/on/off as booleans)")
    if isinstance(value, numbers.Real):
        return str(value)
    raise _Mismatch("a string")


SCALARS = {bool: _to_bool, int: _to_int, float: _to_float, str: _to_str}


def _coerce(kind: Any, value: Any) -> Any:
    """`value` as the declared type `kind` (bool, int, float, str, tuple of those, `X | None`);
    raises _Mismatch naming what was expected. Types it does not know pass the value through."""
    if kind in SCALARS:
        if value is None:
            raise _Mismatch({bool: "true or false", int: "an integer", float: "a number", str: "a string"}[kind])
        return SCALARS[kind](value)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(inner[0], value) if len(inner) == 1 else value
    if origin is tuple and args and Ellipsis not in args:
        nouns = {bool: "booleans", int: "integers", float: "numbers", str: "strings"}
        expected = f"a list of {len(args)} {nouns.get(args[0], 'values') if len(set(args)) == 1 else 'values'}"
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise _Mismatch(expected)
        try:
            return tuple(_coerce(a, v) for a, v in zip(args, value))
        except _Mismatch as inner:
            raise _Mismatch(f"{expected}, each {inner}") from None
    return value


@functools.lru_cache(maxsize=None)
def field_types(cls: type) -> dict[str, Any]:
    """Declared type of each dataclass field of `cls` (string annotations resolved)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(cls)}


def coerce_field(cls: type, name: str, value: Any) -> Any:
    """`value` as field `name` of `cls` declares it; a ConfigError naming the field and value otherwise."""
    try:
        return _coerce(field_types(cls)[name], value)
    except _Mismatch as expected:
        raise ConfigError(f"{cls.__name__}.{name} expects {expected}, got {shown(value)}", name) from None


def _blocking_file(path: Path) -> Path | None:
    """The path itself or its nearest existing ancestor when that is not a folder (a run folder cannot go there)."""
    for candidate in (path, *path.parents):
        try:
            if candidate.exists():
                return None if candidate.is_dir() else candidate
        except OSError:  # a name too long, a permission: left to the run to report
            return None
    return None


@dataclass
class RLConfig:
    """Settings shared by every algorithm (the loop, sampling, optimisation, KL, logging)."""

    # loop
    num_iterations: int = 100          # collect -> update rounds
    prompts_per_iteration: int = 16    # distinct env episodes (prompts) per iteration, over all processes (torchrun splits them; must divide)
    samples_per_prompt: int = 8        # completions per prompt (the GRPO group size)
    seed: int = 0                      # seeds torch, numpy and the env draws; in [0, 2**32)
    # sampling
    max_new_tokens: int = 64           # per action (per step in stepwise envs)
    temperature: float = 1.0           # sampling temperature (0: greedy)
    top_p: float = 1.0                 # nucleus sampling mass, in (0, 1] (1: off)
    max_episode_steps: int = 10        # stepwise envs: actions per episode before truncation
    # optimisation
    learning_rate: float = 1e-5        # AdamW step size, > 0
    weight_decay: float = 0.0          # AdamW decoupled weight decay, >= 0
    adam_betas: tuple[float, float] = (0.9, 0.99)  # AdamW (beta1, beta2), each in [0, 1)
    warmup_iterations: int = 0         # linear warmup of the learning rate, in optimizer steps
    max_grad_norm: float = 1.0         # gradient clipping (0 disables)
    update_epochs: int = 1             # passes over each collected batch
    minibatch_size: int = 0            # trajectories per optimizer step, over all processes (0: the whole batch, one step)
    micro_batch_size: int = 32         # trajectories per forward/backward (gradient accumulation inside a step)
    loss_aggregation: str = "token_mean"  # token_mean (over the optimizer step) | sequence_mean | constant
    max_completion_length: int = 0     # normaliser for "constant" aggregation (0: max_new_tokens)
    bf16: bool = True                  # bf16 autocast on CUDA (ignored on CPU)
    # KL to the reference model
    kl_coeff: float = 0.0              # beta; 0 turns the reference model off
    kl_estimator: str = "k3"           # k1 | k2 | k3 (Schulman's estimators)
    kl_in_reward: bool = False         # True: subtract beta * k1 from token rewards; False: add beta * KL to the loss
    ref_sync_every: int = 0            # copy policy -> reference every N iterations (0: never)
    # evaluation, logging, checkpoints
    eval_every: int = 0                # iterations between evaluations (0: only at the end)
    eval_at_start: bool = True         # evaluate once before the first iteration
    eval_episodes: int = 256           # held-out episodes per evaluation (greedy)
    eval_max_new_tokens: int = 0       # 0: max_new_tokens
    save_every: int = 0                # iterations between checkpoints (0: only at the end)
    keep_checkpoints: int = 2          # complete checkpoints kept in <output_dir> (the newest ones)
    max_nonfinite_steps: int = 3       # stop the run after this many optimizer steps in a row skipped for NaN/inf
    output_dir: str = "runs/run"       # run folder (created; must not be an existing file)
    wandb: str = "off"                 # off | offline | online
    wandb_project: str = "rlgym"       # wandb project name (when wandb is not off)
    progress: bool = True              # tqdm progress bar

    def __post_init__(self) -> None:
        for name in field_types(type(self)):
            setattr(self, name, coerce_field(type(self), name, getattr(self, name)))
        for name in ("num_iterations", "prompts_per_iteration", "samples_per_prompt", "max_new_tokens",
                     "max_episode_steps", "update_epochs", "micro_batch_size", "eval_episodes",
                     "keep_checkpoints", "max_nonfinite_steps"):
            self.require(name, getattr(self, name) > 0, "a positive integer")
        for name in ("minibatch_size", "warmup_iterations", "eval_every", "save_every", "ref_sync_every",
                     "max_completion_length", "eval_max_new_tokens"):
            self.require(name, getattr(self, name) >= 0, "an integer >= 0")
        self.require("seed", 0 <= self.seed < MAX_SEED, "in [0, 2**32)")
        self.require("learning_rate", self.learning_rate > 0, "> 0")
        self.require("weight_decay", self.weight_decay >= 0, ">= 0")
        self.require("adam_betas", all(0 <= b < 1 for b in self.adam_betas), "two numbers in [0, 1)")
        self.require("temperature", self.temperature >= 0, ">= 0")
        self.require("top_p", 0 < self.top_p <= 1, "in (0, 1]")
        self.require("kl_coeff", self.kl_coeff >= 0, ">= 0")
        self.require("max_grad_norm", self.max_grad_norm >= 0, ">= 0")
        self.require("kl_estimator", self.kl_estimator in KL_ESTIMATORS, f"one of {', '.join(KL_ESTIMATORS)}")
        self.require("loss_aggregation", self.loss_aggregation in LOSS_AGGREGATIONS,
                     f"one of {', '.join(LOSS_AGGREGATIONS)}")
        self.require("wandb", self.wandb in WANDB_MODES, "off, offline or online")
        self.require("wandb_project", self.wandb_project.strip() != "", "a name")
        self.require("output_dir", self.output_dir.strip() != "" and "\0" not in self.output_dir, "a folder path")
        blocker = _blocking_file(Path(self.output_dir))
        self.require("output_dir", blocker is None, "a folder, not an existing file" if blocker == Path(self.output_dir)
                     else f"a folder path, but {blocker} is a file")

    def require(self, name: str, condition: bool, expectation: str) -> None:
        """Raise `ConfigError("<Class>.<name> must be <expectation>, got <value>")` unless `condition`."""
        if not condition:
            raise ConfigError(f"{type(self).__name__}.{name} must be {expectation}, got {shown(getattr(self, name))}",
                              name)

    @property
    def batch_size(self) -> int:
        """Trajectories collected per iteration."""
        return self.prompts_per_iteration * self.samples_per_prompt

    def to_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (what config.json holds)."""
        return dataclasses.asdict(self)


def read_config_file(cls: type, path: str | Path) -> dict[str, Any]:
    """The fields a YAML file sets, each coerced to its declared type (no defaults filled, no range checks).

    A missing or unreadable file, a YAML syntax error (with its line and column), a top level that is
    not a mapping, an unknown field or a value of the wrong type is a one-line ConfigError naming the file.
    """
    import yaml

    if not str(path).strip():
        raise ConfigError("config file path is empty")
    file = Path(path)
    if not file.exists():
        raise ConfigError(f"config file not found: {path}")
    if file.is_dir():
        raise ConfigError(f"config file {path} is a directory, not a YAML file")
    if not file.is_file():
        raise ConfigError(f"config file {path} is not a regular file")
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not UTF-8 text") from None
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err.strerror or err}") from None
    try:
        loaded = yaml.load(text, Loader=_unique_key_loader())
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{path}: invalid YAML{where}: {err.problem or err.context}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: invalid YAML: {err}") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid YAML: nested too deeply") from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: expected a mapping of field: value at the top level, got a {type(loaded).__name__}")
    _reject_unknown(cls, loaded, f"{path}: ")
    values = {}
    for name, value in loaded.items():
        try:
            values[name] = coerce_field(cls, name, value)
        except ConfigError as err:
            raise ConfigError(f"{path}: {err}", name) from None
    return values


@functools.lru_cache(maxsize=None)
def _unique_key_loader() -> type:
    """yaml.SafeLoader that refuses a key given twice in one mapping (PyYAML silently keeps the last)."""
    import yaml

    class UniqueKeyLoader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:  # plain keys only: merge keys (<<) may be overridden on purpose
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                    key = self.construct_object(key_node)
                    if key in seen:
                        raise yaml.constructor.ConstructorError(None, None, f"{key!r} is given twice",
                                                                key_node.start_mark)
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return UniqueKeyLoader


def _reject_unknown(cls: type, values: dict, prefix: str = "") -> None:
    unknown = sorted(str(k) for k in values if k not in field_types(cls))
    if unknown:
        raise ConfigError(f"{prefix}unknown {cls.__name__} field(s): {', '.join(unknown)}")


def load_config(cls: type, path: str | Path | None = None, overrides: dict[str, Any] | None = None,
                defaults: dict[str, Any] | None = None):
    """Build `cls` from `defaults` < a YAML file (optional) < `overrides` (None values skipped).

    Unknown keys and bad values are one-line ConfigErrors; a bad value from the file names the file.
    """
    file_values = read_config_file(cls, path) if path is not None else {}
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    values = {**(defaults or {}), **file_values, **overrides}
    _reject_unknown(cls, values)
    try:
        return cls(**values)
    except ConfigError as err:
        if err.field in file_values and err.field not in overrides:
            raise ConfigError(f"{path}: {err}", err.field) from None
        raise
