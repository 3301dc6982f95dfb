"""TRL's config names (GRPOConfig and the TrainingArguments it extends) next to ours.

A TRL name that means the same as one of our fields is accepted for it at the edges: in Python through
`GRPOConfig.from_trl(num_generations=4, beta=0.04)`, in YAML files (`load_config`) and as a flag
(`--num_generations 4`). The constructor itself takes our names only: `GRPOConfig(num_generations=4)`
is a one-line error naming `samples_per_prompt` and the `from_trl` spelling (`refusal`).
TRL's batch names map exactly: `per_device_train_batch_size` is `micro_batch_size` (trajectories per
forward/backward on each process), `gradient_accumulation_steps` G sets `minibatch_size` (trajectories per
optimizer step over all processes) to G x micro_batch_size x processes (`WORLD_SIZE`, as torchrun sets
it), `num_iterations` (TRL's mu, passes over each generation batch) is `update_epochs` and
`max_completion_length` is `max_new_tokens` (this toolkit once used those two names for the number of
training rounds, now `train_iterations`, and the "constant" loss normaliser, now `loss_length_normalizer`;
TRL's meaning is the one kept). Given TRL's batch names, prompts_per_iteration is TRL's generation batch,
per_device_train_batch_size x gradient_accumulation_steps x processes / num_generations (`GenerationBatch`,
refused in one line when it does not divide), unless the same or a later layer sets prompts_per_iteration.
TRL's step-counted names (max_steps, eval_steps, save_steps) are divided by an iteration's optimizer steps
(num_iterations makes that many). reward_weights, max_prompt_length, mask_truncated_completions,
log_completions and report_to are fields of the same name (SAME_NAME). A TRL name that means something else
here is refused with one line naming ours. This toolkit's own removed fields (REMOVED, e.g.
max_episode_steps) are refused the same way.
The "Coming from TRL" table (scripts/config_reference.py) is generated from these tables.

This module sits under training/config.py (which imports it), and imports only core.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lmgym.core.checked_config import ConfigError, field_types
from lmgym.core.coercion import BOOL_WORDS, shown


def _loss_type(value: Any) -> str:
    known = {"dapo": "token_mean", "grpo": "sequence_mean", "dr_grpo": "constant"}
    if value not in known:
        raise ConfigError(f"loss_type {shown(value)} has no counterpart here: loss_aggregation is token_mean "
                          f"(TRL's dapo), sequence_mean (grpo) or constant (dr_grpo)", "loss_aggregation")
    return known[value]


def _scale_rewards(value: Any) -> bool:
    word = str(value).strip().lower()
    if word in ("group", "true", "false", "none") or isinstance(value, bool):
        return value if isinstance(value, bool) else word in ("group", "true")
    raise ConfigError(f"scale_rewards {shown(value)} has no counterpart here: scale_by_std divides advantages by "
                      f"the group std (TRL's 'group') or not at all ('none')", "scale_by_std")


def _disable_tqdm(value: Any) -> bool:
    word = str(value).strip().lower()
    if isinstance(value, bool) or word in BOOL_WORDS:
        return not (value if isinstance(value, bool) else BOOL_WORDS[word])
    raise ConfigError(f"disable_tqdm expects true or false, got {shown(value)}", "progress")


@dataclass(frozen=True)
class Alias:
    """A TRL name accepted for one of our fields."""

    ours: str
    note: str = ""                               # how the two compare, for the docs table (docs/config-reference.md)
    convert: Callable[[Any], Any] | None = None  # TRL's value -> ours (None: the same value)
    step_counted: bool = False                   # TRL counts optimizer steps, we count iterations


# this toolkit's old field names, refused with one line saying what replaced them (like DIFFERENT)
REMOVED = {
    "max_episode_steps": "is gone: an episode's step limit is the env's own (its max_steps, or a gymnasium "
                         "TimeLimit wrapper); set it on the env",
}

# TRL name -> our field, same meaning
SAME = {
    "num_generations": Alias("samples_per_prompt"),
    "beta": Alias("kl_coeff", "TRL's default is 0.0; GRPOConfig's here is 0.04"),
    "epsilon": Alias("clip_low", "sets clip_high too unless epsilon_high / clip_high is given, as in TRL"),
    "epsilon_high": Alias("clip_high"),
    "loss_type": Alias("loss_aggregation", "dapo -> token_mean, grpo -> sequence_mean, dr_grpo -> constant; "
                                           "others refused", _loss_type),
    "scale_rewards": Alias("scale_by_std", "group/true -> true, none/false -> false; batch refused", _scale_rewards),
    "max_steps": Alias("train_iterations", "divided by the optimizer steps of an iteration (update_epochs x "
                                           "minibatches, TRL's num_iterations x 1 with its batch names); refused "
                                           "when they do not divide it", step_counted=True),
    "eval_steps": Alias("eval_every", "as max_steps", step_counted=True),
    "save_steps": Alias("save_every", "as max_steps", step_counted=True),
    "warmup_steps": Alias("warmup_iterations", "both count optimizer steps (a named lr_scheduler_type in an RL "
                                               "trainer: iterations)"),
    "save_total_limit": Alias("keep_checkpoints", "must be >= 1 here (TRL: None keeps all)"),
    "disable_tqdm": Alias("progress", "negated", _disable_tqdm),
    "num_iterations": Alias("update_epochs", "TRL's mu, passes over each generation batch (the number of "
                                             "collect -> update rounds is train_iterations)"),
    "max_completion_length": Alias("max_new_tokens", "per action: the whole completion in single-turn envs; with "
                                                     "loss_length_normalizer 0 also dr_grpo's divisor, as in TRL"),
    "per_device_train_batch_size": Alias("micro_batch_size", "trajectories per forward/backward on each process "
                                                             "(RL: unless max_tokens_per_microbatch)"),
    "gradient_accumulation_steps": Alias("minibatch_size", "minibatch_size = gradient_accumulation_steps x "
                                                           "micro_batch_size x processes (WORLD_SIZE): "
                                                           "trajectories per optimizer step"),
}
# TRL names whose value is scaled into ours: minibatch_size counts trajectories, not micro-batches
SCALED_BY_MICRO_BATCH = ("gradient_accumulation_steps",)

# TRL names that are also ours, with the same meaning (listed in the docs table only)
SAME_NAME = {
    "learning_rate": "constant after warmup here by default; TRL decays it linearly by default",
    "lr_scheduler_type": "transformers.get_scheduler's names needing no other argument; None (the default here): "
                         "constant after warmup, TRL's default is linear",
    "temperature": "", "top_p": "", "seed": "", "bf16": "", "max_grad_norm": "", "weight_decay": "",
    "output_dir": "",
    "torch_compile": "regional here (each decoder layer); on by default on CUDA (TRL: off)",
    "torch_compile_backend": "",
    "gradient_checkpointing": "non-reentrant, each decoder layer, with torch_compile, LoRA and FSDP; off by default "
                              "here (TRL's configs: on)",
    "reward_weights": "one weight per reward function, in order, for the env the trainer builds from a dataset "
                      "(an env made by you takes its own reward_weights)",
    "max_prompt_length": "prompt tokens kept, from the left (0: all; TRL: None)",
    "mask_truncated_completions": "an episode cut off (at max_new_tokens, or the env's step limit) is scored and "
                                  "counts in its group, but none of its tokens is trained on",
    "log_completions": "each iteration's prompts, completions and rewards appended to <output_dir>/completions.jsonl "
                       "and sent to the report_to trackers as a table",
    "report_to": "wandb | tensorboard | mlflow | trackio | none, one or a list, logged in TRL's metric names; wandb "
                 "turns on the wandb field (WANDB_MODE offline, else online); the others need the [trackers] extra",
}

# TRL name -> why it is refused, naming ours (a different meaning, or none here)
DIFFERENT = {
    "generation_batch_size": "means something else here: each iteration generates prompts_per_iteration x "
                             "samples_per_prompt completions",
    "steps_per_generation": "means something else here: minibatch_size splits an iteration's batch into "
                            "optimizer steps",
    "num_train_epochs": "has no counterpart: envs draw prompts, there are no dataset epochs; set train_iterations",
    "adam_beta1": "is not a field here: set adam_betas to [beta1, beta2]",
    "adam_beta2": "is not a field here: set adam_betas to [beta1, beta2]",
    "sync_ref_model": "means something else here: ref_sync_every copies the policy into the reference every N "
                      "iterations (TRL mixes them with ref_model_mixup_alpha every ref_model_sync_steps steps)",
    "ref_model_sync_steps": "means something else here: ref_sync_every copies the policy into the reference "
                            "every N iterations (TRL mixes them every N optimizer steps)",
    "logging_steps": "has no counterpart: every iteration is logged to metrics.jsonl",
    "warmup_ratio": "is not a field here: set warmup_iterations to warmup_ratio x the run's optimizer steps",
    "top_k": "has no counterpart: sampling takes temperature and top_p",
    "min_p": "has no counterpart: sampling takes temperature and top_p",
    "importance_sampling_level": "has no counterpart: ratios are per token",
    "gradient_checkpointing_kwargs": "has no counterpart: gradient_checkpointing here is always non-reentrant "
                                     "(use_reentrant false), on every decoder layer",
}

# TRL name in DIFFERENT -> our nearest field(s), for the docs table
NEAREST = {
    "generation_batch_size": "prompts_per_iteration",
    "steps_per_generation": "minibatch_size",
    "num_train_epochs": "train_iterations",
    "adam_beta1": "adam_betas",
    "adam_beta2": "adam_betas",
    "sync_ref_model": "ref_sync_every",
    "ref_model_sync_steps": "ref_sync_every",
    "logging_steps": "",
    "warmup_ratio": "warmup_iterations",
    "top_k": "",
    "min_p": "",
    "importance_sampling_level": "",
    "gradient_checkpointing_kwargs": "gradient_checkpointing",
}


def translate(cls: type, values: dict[str, Any], where: str = "") -> tuple[dict[str, Any], dict[str, str]]:
    """`values` with TRL's names replaced by ours, and {our field: TRL name} for the step-counted ones.

    A TRL name that means something else, names a field `cls` lacks, or comes with its own field too
    is a one-line ConfigError (prefixed with `where`, e.g. a file name).
    """
    fields = field_types(cls)
    # a name that is a field of `cls` is that field (DPOConfig.beta), whatever TRL's name means elsewhere
    out = {k: v for k, v in values.items()
           if not (isinstance(k, str) and k not in fields and (k in SAME or k in DIFFERENT))}
    step_counted: dict[str, str] = {}
    for name, value in values.items():
        if not isinstance(name, str) or name in fields:
            continue
        if name in DIFFERENT or name in REMOVED:
            raise ConfigError(f"{where}{cls.__name__}: {name} {DIFFERENT.get(name) or REMOVED[name]}", name)
        alias = SAME.get(name)
        if alias is None:
            continue
        if alias.ours not in fields:
            raise ConfigError(f"{where}{cls.__name__} has no {alias.ours}, which TRL's {name} stands for", name)
        if alias.ours in out:
            raise ConfigError(f"{where}{name} and {alias.ours} are both given ({name} is TRL's name for "
                              f"{alias.ours})", alias.ours)
        try:
            out[alias.ours] = alias.convert(value) if alias.convert else value
        except ConfigError as err:
            raise ConfigError(f"{where}{cls.__name__}: {err}", alias.ours) from None
        if alias.step_counted:
            step_counted[alias.ours] = name
    for name in SCALED_BY_MICRO_BATCH:
        if name in values and name not in fields and SAME[name].ours in fields:
            out[SAME[name].ours] = _accumulation(cls, name, values[name], where)
    if "epsilon" in values and "epsilon_high" not in values and "clip_high" not in values and "clip_high" in fields:
        out["clip_high"] = out["clip_low"]  # TRL: epsilon_high defaults to epsilon
    derives = {"prompts_per_iteration", "samples_per_prompt"} <= set(fields) and "prompts_per_iteration" not in values
    if derives and any(n in values and n not in fields for n in BATCH_NAMES):
        out["prompts_per_iteration"] = GenerationBatch(where)  # TRL's generation batch, once the layers are merged
    return out, step_counted


# TRL names that set the generation batch (per_device_train_batch_size x gradient_accumulation_steps x processes)
BATCH_NAMES = ("per_device_train_batch_size", "gradient_accumulation_steps")


class Deferred:
    """A value resolved once every layer (defaults < file < flags) is merged (`resolve_accumulation`)."""


@dataclass(frozen=True)
class Accumulation(Deferred):
    """TRL's gradient_accumulation_steps, kept as given until the micro-batch size of the resolved config is
    known (a later layer may set it): `resolve_accumulation` turns it into minibatch_size."""

    steps: int
    name: str = "gradient_accumulation_steps"


@dataclass(frozen=True)
class GenerationBatch(Deferred):
    """prompts_per_iteration as TRL derives its generation batch from the batch names: per_device_train_batch_size
    x gradient_accumulation_steps x processes completions, num_generations of them a prompt. Set by a layer
    using TRL's batch names without prompts_per_iteration; a later layer's prompts_per_iteration replaces it."""

    where: str = ""


def _accumulation(cls: type, name: str, value: Any, where: str) -> Accumulation:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}{cls.__name__}: {name} must be a positive integer; got {shown(value)}",
                          SAME[name].ours)
    return Accumulation(value, name)


def resolve_accumulation(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """`values` with an `Accumulation` as minibatch_size (trajectories per optimizer step over all processes):
    its steps x micro_batch_size (the values', else the class default) x processes; and a `GenerationBatch` as
    prompts_per_iteration (`generation_prompts`)."""
    out = dict(values)
    micro = out.get("micro_batch_size", getattr(cls, "micro_batch_size", None))
    for key, value in values.items():
        if isinstance(value, Accumulation):
            if isinstance(micro, bool) or not isinstance(micro, int):
                raise ConfigError(f"{cls.__name__}: {value.name} needs an integer micro_batch_size (TRL's "
                                  f"per_device_train_batch_size); got {shown(micro)}", "micro_batch_size")
            out[key] = value.steps * micro * world_size()
    for key, value in values.items():
        if isinstance(value, GenerationBatch):
            accumulation = values.get("minibatch_size")
            steps = accumulation.steps if isinstance(accumulation, Accumulation) else 1
            samples = out.get("samples_per_prompt", getattr(cls, "samples_per_prompt", None))
            out[key] = generation_prompts(cls, micro, steps, samples, value.where)
    return out


def generation_prompts(cls: type, micro: Any, steps: int, samples: Any, where: str = "") -> int:
    """Prompts per iteration as TRL's generation batch makes them: micro x steps x processes completions
    (per_device_train_batch_size x gradient_accumulation_steps x WORLD_SIZE), `samples` (num_generations) a
    prompt. Refused in one line when `samples` does not divide it (as TRL refuses) or the prompts do not split
    evenly over the processes (each keeps whole groups here)."""
    for name, value, trl in (("micro_batch_size", micro, "per_device_train_batch_size"),
                             ("samples_per_prompt", samples, "num_generations")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{where}{cls.__name__}: TRL's generation batch needs a positive integer {name} "
                              f"({trl}); got {shown(value)}", name)
    world = world_size()
    completions = micro * steps * world
    batch = (f"TRL's generation batch, per_device_train_batch_size {micro} x gradient_accumulation_steps {steps} x "
             f"processes {world} = {completions} completions,")
    if completions % samples:
        raise ConfigError(f"{where}{cls.__name__}: {batch} must be divisible by num_generations ({samples}); change "
                          f"one of them, or set prompts_per_iteration", "prompts_per_iteration")
    prompts = completions // samples
    if prompts % world:
        raise ConfigError(f"{where}{cls.__name__}: {batch} makes {prompts} prompts of {samples}, which do not split "
                          f"evenly over the {world} processes (each keeps whole groups here); change one of them, "
                          f"or set prompts_per_iteration", "prompts_per_iteration")
    return prompts


def world_size() -> int:
    """The number of processes torchrun launched (WORLD_SIZE), 1 without it."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


def refusal(cls: type, name: str) -> str | None:
    """The line refusing TRL's (or an old) `name` given to `cls`'s constructor; None when it is neither."""
    if name in DIFFERENT or name in REMOVED:
        return f"{cls.__name__}: {name} {DIFFERENT.get(name) or REMOVED[name]}"
    alias = SAME.get(name)
    if alias is None:
        return None
    if alias.ours not in field_types(cls):
        return f"{cls.__name__} has no {alias.ours}, which TRL's {name} stands for"
    return (f"{cls.__name__}: {name} is TRL's name for {alias.ours}: pass {alias.ours}=..., or build with "
            f"{cls.__name__}.from_trl({name}=...)")


def check_step_counts(config, step_counted: dict[str, str]):
    """`config` with TRL's step-counted names (max_steps, ...) turned into iterations: each divided by the
    optimizer steps an iteration makes (TRL's num_iterations makes as many steps of each generation batch);
    refused in one line when an iteration's steps are not fixed or do not divide the value."""
    if not step_counted:
        return config
    steps = config.optimizer_steps_per_iteration()
    if steps == 1:
        return config
    for ours, name in step_counted.items():
        if not steps or getattr(config, ours) % steps:
            makes = (f"makes {steps} (update_epochs x minibatches), which does not divide {getattr(config, ours)}"
                     if steps else "may make several")
            raise ConfigError(f"{type(config).__name__}: TRL's {name} counts optimizer steps, but here an iteration "
                              f"{makes}; set {ours}, counted in iterations", ours)
    return dataclasses.replace(config, **{ours: getattr(config, ours) // steps for ours in step_counted})
