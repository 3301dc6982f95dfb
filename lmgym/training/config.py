"""`TrainerConfig` and the loading of configs from YAML files and overrides.

The checked-config base (coercion to the declared types, `require`, `to_dict`, field help) is
`lmgym.core.checked_config.CheckedConfig`, re-exported here with `ConfigError`, `setting` and the field helpers.
`load_config` layers defaults < a YAML file < overrides; each layer may spell a nested config as a
mapping (`mcts: {simulations: 24}`) or as dotted names (`mcts.simulations`), and may use TRL's names
(training/trl_names.py; in Python: `GRPOConfig.from_trl(...)`). Every bad value is a one-line
ConfigError naming the field, the bad value and, when it came from a file, the file.

Whether wandb's "online" mode can log in is found when the config is built (before any model loads).

`wandb.init` in online mode without credentials stops with a traceback (or waits at a prompt) only once
the run starts; `online_login_problem` asks wandb's own credential lookup first: an earlier `wandb.login`
in this process, WANDB_API_KEY (or WANDB_IDENTITY_TOKEN_FILE), the .netrc file (~/.netrc, or NETRC), then
wandb's settings files, for wandb's server (WANDB_BASE_URL). All of it is read locally: no network, no
prompt, and nothing is stored.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmgym.core.checked_config import (
    CheckedConfig,
    ConfigError,
    UnknownFieldError,
    coerce_field,
    field_default,
    field_help,
    field_types,
    nested_fields,
    setting,
    unknown_fields_line,
)
from lmgym.core.coercion import BOOL_WORDS, shown
from lmgym.core.dotted_names import coerce_setting, flatten, settings_of, unflatten
from lmgym.core.extras import missing_extra, module_available
from lmgym.core.messages import first_line
from lmgym.policies.loading.hub import check_repo_id
from lmgym.training import trl_names
from lmgym.training.lr_schedules import schedule_problem
from lmgym.training.trl_names import REMOVED

__all__ = ["TrainerConfig", "ConfigError", "UnknownFieldError", "CheckedConfig", "setting", "field_help",
           "field_types", "field_default", "nested_fields", "coerce_field", "shown", "BOOL_WORDS", "REMOVED",
           "load_config", "read_config_file", "checked_config", "module_available"]

WANDB_MODES = ("off", "offline", "online")
REPORT_TO = ("wandb", "tensorboard", "mlflow", "trackio", "none")  # TRL's report_to names (training/trackers/)
TRACKER_MODULES = {"tensorboard": "tensorboard", "mlflow": "mlflow", "trackio": "trackio"}  # the [trackers] extra
LOGIN_FIXES = "run `wandb login`, set WANDB_API_KEY, or use --wandb offline (and `wandb sync` later)"
DATA_PARALLEL_MODES = ("ddp", "fsdp", "allreduce")  # training/data_parallel.py
MAX_SEED = 2**32  # numpy's legacy seeding and many tools take 32-bit seeds


def _blocking_file(path: Path) -> Path | None:
    """The path itself or its nearest existing ancestor when that is not a folder (a run folder cannot go there)."""
    for candidate in (path, *path.parents):
        try:
            if candidate.exists():
                return None if candidate.is_dir() else candidate
        except OSError:  # a name too long, a permission: left to the run to report
            return None
    return None


def online_login_problem() -> str | None:
    """None when wandb would find credentials for its server without asking; otherwise the problem, one line.
    A wandb without this lookup (wbauth, wandb >= 0.22) gives None: wandb.init decides then."""
    try:
        from wandb.errors import Error as WandbError
        from wandb.sdk import wandb_setup
        from wandb.sdk.lib.wbauth import authenticate
    except ImportError:
        return None
    try:
        host = wandb_setup.singleton().settings.base_url
        found = authenticate.authenticate_session(host=host, source="rlgym", prompt=False, update_session=False)
    except WandbError as err:  # e.g. a malformed WANDB_API_KEY
        return f"wandb cannot use its credentials ({first_line(err)[:200]})"
    return None if found is not None else f"wandb finds no API key for {host}"


@dataclass
class TrainerConfig(CheckedConfig):
    """Settings of any `Trainer`: the loop, the optimizer, the run folder, checkpoints and logging.

    TRL's names for our fields are translated by `from_trl` (and by `load_config` and
    the CLI); given to the constructor they are refused in one line naming both spellings.
    """

    # loop
    train_iterations: int = setting(100, "training iterations (RL: collect -> update rounds; TRL's max_steps "
                                         "when each is one optimizer step)")
    seed: int = setting(0, "seeds torch, numpy, Python's random and the env draws; in [0, 2**32)")
    # optimisation
    learning_rate: float = setting(1e-5, "AdamW step size, > 0 (peak; lr_scheduler_type shapes it)")
    weight_decay: float = setting(0.0, "AdamW decoupled weight decay, >= 0")
    adam_betas: tuple[float, float] = setting((0.9, 0.99), "AdamW (beta1, beta2), each in [0, 1)")
    warmup_iterations: int = setting(0, "linear learning-rate warmup, counted in optimizer steps (a named "
                                        "schedule in RL: in iterations)")
    lr_scheduler_type: str | None = setting(None, "None: constant after the warmup; else transformers' "
                                                  "get_scheduler name (linear, cosine, ...: training/lr_schedules.py)")
    max_grad_norm: float = setting(1.0, "gradient-norm clipping (0: off)")
    micro_batch_size: int = setting(32, "items (RL: trajectories, unless max_tokens_per_microbatch) per "
                                        "forward/backward (gradient accumulation inside a step)")
    bf16: bool = setting(True, "bf16 autocast on CUDA (ignored on CPU)")
    gradient_checkpointing: bool = setting(False, "recompute decoder layers' activations in the backward pass: less "
                                                  "memory, more compute (policy, own critic, PRM)")
    torch_compile: bool | None = setting(None, "torch.compile the decoder layers for training and scoring "
                                               "(None: on CUDA; FSDP's layers only if True)")
    torch_compile_backend: str = setting("inductor", "torch.compile backend when torch_compile is on")
    data_parallel: str = setting("ddp", "ddp | fsdp | allreduce: how processes average gradients (torch DDP, "
                                        "FSDP2 layer sharding, one all-reduce)")
    # False: training/fsdp.gradient_sync keeps the layers whole from a step's first forward to its last backward
    fsdp_reshard_after_forward: bool = setting(True, "FSDP2: re-shard each layer after every forward (False: "
                                                     "keep it gathered for the step: faster, more memory)")
    # evaluation, logging, checkpoints
    eval_every: int = setting(0, "iterations between evaluations (0: only at the end)")
    eval_at_start: bool = setting(True, "evaluate once before the first iteration")
    save_every: int = setting(0, "iterations between checkpoints (0: only at the end)")
    keep_checkpoints: int = setting(2, "complete checkpoints <output_dir>/checkpoint-N kept (the newest; HF/TRL: "
                                       "save_total_limit)")
    save_only_model: bool = setting(False, "checkpoints hold the model alone (weights, config, tokenizer): smaller, "
                                           "never resumed (as HF's)")
    max_nonfinite_steps: int = setting(3, "stop after this many optimizer steps in a row skipped for NaN/inf")
    output_dir: str = setting("runs/run", "run folder (created; must not be an existing file)")
    wandb: str = setting("off", "off | offline | online: mirror the metrics to wandb (needs wandb installed)")
    wandb_project: str = setting("rlgym", "wandb project name (when wandb is not off)")
    report_to: tuple[str, ...] = setting((), "trackers (TRL's report_to): wandb, tensorboard, mlflow, trackio or "
                                             "none; wandb turns the wandb field on")
    progress: bool = setting(True, "tqdm progress bars")
    push_to_hub: str = setting("", "hub repo id (user/name) the saved model folder is uploaded to (empty: none); "
                                   "checked before training")
    hub_dry_run: bool = setting(False, "with push_to_hub: check the repo name only (no token, no network), never "
                                       "upload")
    resume_from_checkpoint: str | None = setting(None, "a checkpoint folder to resume from, or true: the newest "
                                                       "complete one in output_dir (as HF's)")

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("train_iterations", "micro_batch_size", "keep_checkpoints", "max_nonfinite_steps"):
            self.require(name, getattr(self, name) > 0, "a positive integer")
        for name in ("warmup_iterations", "eval_every", "save_every"):
            self.require(name, getattr(self, name) >= 0, "an integer >= 0")
        self.require("seed", 0 <= self.seed < MAX_SEED, "in [0, 2**32)")
        self.require("learning_rate", self.learning_rate > 0, "> 0")
        if (problem := schedule_problem(self.lr_scheduler_type)) is not None:
            raise ConfigError(f"{type(self).__name__}.lr_scheduler_type {problem}", "lr_scheduler_type")
        self.require("weight_decay", self.weight_decay >= 0, ">= 0")
        self.require("adam_betas", all(0 <= b < 1 for b in self.adam_betas), "two numbers in [0, 1)")
        self.require("max_grad_norm", self.max_grad_norm >= 0, ">= 0")
        self.require("wandb", self.wandb in WANDB_MODES, "off, offline or online")
        self._resolve_report_to()
        self.require("data_parallel", self.data_parallel in DATA_PARALLEL_MODES, "ddp, fsdp or allreduce")
        self.require("wandb_project", self.wandb_project.strip() != "", "a name")
        if self.wandb != "off" and not module_available("wandb"):
            raise ConfigError(f"{type(self).__name__}.wandb is {self.wandb!r}, but wandb is not installed: "
                              f"pip install wandb (or set wandb to off)", "wandb")
        if self.wandb == "online" and (problem := online_login_problem()) is not None:
            raise ConfigError(f"{type(self).__name__}.wandb is 'online', but {problem}: {LOGIN_FIXES}", "wandb")
        self.require("output_dir", self.output_dir.strip() != "" and "\0" not in self.output_dir, "a folder path")
        if self.push_to_hub:
            try:
                check_repo_id(self.push_to_hub)
            except ValueError as err:
                raise ConfigError(f"{type(self).__name__}.{err}", "push_to_hub") from None
        self.require("save_only_model", not (self.save_only_model and self.data_parallel == "fsdp"),
                     "off under data_parallel fsdp (its checkpoints are sharded states to resume from)")
        self.require("resume_from_checkpoint", self.resume_from_checkpoint is None
                     or (isinstance(self.resume_from_checkpoint, str) and self.resume_from_checkpoint.strip() != ""),
                     "a checkpoint folder, or true")
        blocker = _blocking_file(Path(self.output_dir))
        self.require("output_dir", blocker is None, "a folder, not an existing file" if blocker == Path(self.output_dir)
                     else f"a folder path, but {blocker} is a file")

    def _resolve_report_to(self) -> None:
        """report_to's names checked ("none" alone: no tracker), and the library of each tracker (the [trackers]
        extra) found, before any model loads; wandb in it turns on the wandb field, and a wandb field that is on puts
        wandb in it, so the two agree."""
        names = tuple(dict.fromkeys(name.strip().lower() for name in self.report_to))
        unknown = [name for name in names if name not in REPORT_TO]
        self.require("report_to", not unknown, f"names from {', '.join(REPORT_TO)} (unknown: {', '.join(unknown)})")
        self.require("report_to", "none" not in names or names == ("none",), "'none' alone, or tracker names")
        for name in names:
            module = TRACKER_MODULES.get(name)
            if module is not None and not module_available(module):
                raise ConfigError(f"{type(self).__name__}.{missing_extra(f'report_to {name}', module)}", "report_to")
        names = tuple(name for name in names if name != "none")
        if "wandb" in names and self.wandb == "off":
            self.wandb = "offline" if os.environ.get("WANDB_MODE", "").lower() in ("offline", "dryrun") else "online"
        if self.wandb != "off" and "wandb" not in names:
            names = ("wandb", *names)
        self.report_to = names

    @classmethod
    def from_trl(cls, **values: Any):
        """The config built from `values`, where TRL's names stand for ours (`GRPOConfig.from_trl(num_generations=4,
        beta=0.04)`); a TRL name that means something else here is a one-line ConfigError naming ours."""
        translated, step_counted = trl_names.translate(cls, values)
        config = cls(**trl_names.resolve_accumulation(cls, translated))
        return trl_names.check_step_counts(config, step_counted)

    @classmethod
    def refusal(cls, name: Any) -> str | None:
        """TRL's names (and old ones) given to the constructor are refused naming ours and `from_trl`."""
        return (trl_names.refusal(cls, name) if isinstance(name, str) else None) or super().refusal(name)

    def optimizer_steps_per_iteration(self) -> int | None:
        """Optimizer steps one iteration makes, when the config alone says (None: it depends on the trainer)."""
        return None


def checked_config(owner: str, config_class: type, config: Any) -> Any:
    """`config` for `owner` (a trainer's name; None: `config_class()`), or a one-line TypeError naming
    the config class expected (and, for a config of another trainer, fields it lacks)."""
    config = config_class() if config is None else config
    missing = [n for n in field_types(config_class) if not hasattr(config, n)]
    if not isinstance(config, TrainerConfig) or missing:
        lacks = f" (it has no {', '.join(missing[:3])})" if missing and isinstance(config, TrainerConfig) else ""
        raise TypeError(f"{owner} takes a {config_class.__name__}, got a {type(config).__name__}{lacks}")
    return config


def read_config_file(cls: type, path: str | Path) -> dict[str, Any]:
    """The fields a YAML file sets, each coerced to its declared type (no defaults filled, no range checks);
    a nested config's fields dotted (`mcts: {simulations: 24}` -> {"mcts.simulations": 24}).

    TRL's names for our fields are translated (training/trl_names.py). A missing or unreadable file, a YAML
    syntax error (with its line and column), a top level that is not a mapping, an unknown field or a value
    of the wrong type is a one-line ConfigError naming the file.
    """
    return trl_names.resolve_accumulation(cls, _read_file(cls, path)[0])


def _read_file(cls: type, path: str | Path) -> tuple[dict[str, Any], dict[str, str]]:
    """read_config_file's values, and the step-counted TRL names among them (trl_names.translate)."""
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
        return {}, {}
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: expected a mapping of field: value at the top level, got a {type(loaded).__name__}")
    loaded, step_counted = _layer(cls, loaded, f"{path}: ")
    _reject_unknown(cls, loaded, f"{path}: ")
    values = {}
    for name, value in loaded.items():
        try:
            values[name] = value if isinstance(value, trl_names.Deferred) else coerce_setting(cls, name, value)
        except ConfigError as err:
            raise ConfigError(f"{path}: {err}", name) from None
    return values, step_counted


@functools.cache
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


def _layer(cls: type, values: dict, where: str = "") -> tuple[dict[str, Any], dict[str, str]]:
    """One layer of settings spelled flat: nested configs as dotted names, TRL's names as ours (and the
    step-counted TRL names among them, trl_names.translate)."""
    return trl_names.translate(cls, flatten(cls, values), where)


def _reject_unknown(cls: type, values: dict, prefix: str = "") -> None:
    """A one-line ConfigError for the names that are neither fields nor dotted nested fields of `cls`: what to
    write instead where `cls.refusal` knows (`mcts_simulations` -> `mcts.simulations`), else each unknown name
    with the close known ones (`learning_rat (did you mean learning_rate?)`)."""
    unknown = [k for k in values if k not in field_types(cls) and k not in settings_of(cls)]
    for name in unknown:
        if advice := cls.refusal(name):
            raise ConfigError(f"{prefix}{advice}", str(name))
    if unknown:
        known = [*field_types(cls), *settings_of(cls)]
        raise ConfigError(prefix + unknown_fields_line(cls.__name__, sorted(unknown, key=str), known))


def load_config(cls: type, path: str | Path | None = None, overrides: dict[str, Any] | None = None,
                defaults: dict[str, Any] | None = None):
    """Build `cls` from `defaults` < a YAML file (optional) < `overrides` (None values skipped).

    Each layer may use TRL's names (training/trl_names.py) and may set a nested config's fields as a
    mapping or by dotted names (`{"mcts.simulations": 24}`); a layer changes only the fields it names.
    Unknown keys and bad values are one-line ConfigErrors; a bad value from the file names the file.
    """
    default_layer = _layer(cls, defaults or {})
    file_values, file_steps = _read_file(cls, path) if path is not None else ({}, {})
    overrides, override_steps = _layer(cls, {k: v for k, v in (overrides or {}).items() if v is not None})
    values: dict[str, Any] = {}
    step_counted: dict[str, str] = {}  # TRL's step-counted names whose value is the one kept
    for layer, steps in (default_layer, (file_values, file_steps), (overrides, override_steps)):
        for name in layer:
            step_counted.pop(name, None)
        values.update(layer)
        step_counted.update(steps)
    values = trl_names.resolve_accumulation(cls, values)  # gradient_accumulation_steps x the kept micro_batch_size
    _reject_unknown(cls, values)
    try:
        config = cls(**unflatten(values))
        return trl_names.check_step_counts(config, step_counted)
    except ConfigError as err:
        if err.field in file_values and err.field not in overrides:
            raise ConfigError(f"{path}: {err}", err.field) from None
        raise
