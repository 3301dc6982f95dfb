"""Metric names as TRL's GRPOTrainer logs them, for metrics.jsonl and the trackers (`report_to`).

Inside the toolkit a row keeps its own names (`reward_mean`, `reward_<fn>`, `completion_length`, ...): the rows
`train()` returns, the callbacks' `on_log` rows, the plots and the golden traces read them (`EarlyStopping` takes
either name). At the boundary, `trl_names(row)` renames them: metrics.jsonl, trainer_state.json's log_history,
wandb, TensorBoard, MLflow and trackio see TRL's names (`RENAMED`, and `rewards/<fn>/mean` with `rewards/<fn>/std`
for each reward function). `internal_names(row)` is the inverse, by which the toolkit reads a metrics.jsonl back
(a resumed run's rows); a row in the old names passes through it unchanged, so run folders written before the
rename read as before. `read_metrics(path)` reads any metrics.jsonl, old or new,
in TRL's names (`trl_names` leaves TRL's names as they are).

A key `reward_<fn>` is a reward function's mean when the row holds its per-episode values (`rewards_<fn>`, a
list: training rows), or, without them (evaluation rows), when it is not one of `OTHER_REWARD_KEYS` (the
toolkit's other `reward_*` metrics: DPO's implicit rewards keep their names). The per-episode lists (`rewards`,
`rewards_<fn>`) have no counterpart in TRL and keep their names; trackers get the scalars only (wandb the lists
too, as before). `eval_` rows are renamed after the prefix (`eval_reward_mean` -> `eval_reward`), as
transformers prefixes TRL's evaluation metrics.
"""
from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RENAMED = {  # the toolkit's name -> TRL's (GRPOTrainer's logged metrics)
    "reward_mean": "reward",
    "completion_length": "completions/mean_length",
    "truncated_fraction": "completions/clipped_ratio",
    "zero_variance_groups": "frac_reward_zero_std",
    "clip_fraction": "clip_ratio/region_mean",
    "policy_lag": "rollouts/policy_lag",  # rollout_workers (algorithms/async_rollouts.py): no TRL counterpart
    "dropped_stale_trajectories": "rollouts/dropped_stale",
}
SAME = ("reward_std", "kl", "entropy", "loss", "grad_norm", "learning_rate")  # TRL's names already
OTHER_REWARD_KEYS = ("reward_mean", "reward_std", "reward_failures", "reward_chosen", "reward_rejected",
                     "reward_margin", "reward_accuracy")  # reward_* metrics that are not a function's mean
EVAL_RENAMED = {"mean_length": "completions/mean_length"}  # the evaluation's own names (logged as eval_<name>)
EVAL = "eval_"
_BACK = {trl: ours for ours, trl in RENAMED.items()}
_EVAL_BACK = {trl: ours for ours, trl in EVAL_RENAMED.items()}


def _split(key: str) -> tuple[str, str]:
    """("eval_", rest) for an evaluation key, else ("", key)."""
    return (EVAL, key[len(EVAL):]) if key.startswith(EVAL) else ("", key)


def reward_functions(row: Mapping[str, Any]) -> set[str]:
    """The reward functions whose per-episode values (`rewards_<fn>`, lists) the row holds."""
    return {_split(key)[1][len("rewards_"):] for key, value in row.items()
            if _split(key)[1].startswith("rewards_") and isinstance(value, list)}


def trl_name(key: str, functions: set[str] = frozenset()) -> str:
    """One key in TRL's names (`functions`: the row's reward functions, `reward_functions(row)`)."""
    prefix, name = _split(key)
    if prefix and name in EVAL_RENAMED:
        return prefix + EVAL_RENAMED[name]
    if name in RENAMED:
        return prefix + RENAMED[name]
    if name.startswith("reward_") and name not in OTHER_REWARD_KEYS:
        fn = name[len("reward_"):]
        if fn in functions or not functions:
            return f"{prefix}rewards/{fn}/mean"
    return key


def trl_names(row: Mapping[str, Any]) -> dict[str, Any]:
    """`row` with TRL's names, in the same order, and `rewards/<fn>/std` (population std of the applicable
    values, as `reward_std`) after each `rewards/<fn>/mean` whose values the row holds. A row already in TRL's
    names comes back equal."""
    functions = reward_functions(row)
    out: dict[str, Any] = {}
    for key, value in row.items():
        new = trl_name(key, functions)
        out[new] = value
        if new != key and new.endswith("/mean"):
            prefix, name = _split(key)
            std = _std(row.get(f"{prefix}rewards_{name[len('reward_'):]}"))
            if std is not None:
                out[new[:-len("mean")] + "std"] = std
    return out


def _std(values: Any) -> float | None:
    """The population std of a list's numbers (None entries: not applicable); None without any."""
    applicable = [float(v) for v in values if v is not None] if isinstance(values, list) else []
    if not applicable:
        return None
    mean = sum(applicable) / len(applicable)
    return math.sqrt(sum((v - mean) ** 2 for v in applicable) / len(applicable))


def internal_name(key: str) -> str:
    """One key in the toolkit's own names (a key in them, or without a counterpart, comes back as it is)."""
    prefix, name = _split(key)
    if prefix and name in _EVAL_BACK:
        return prefix + _EVAL_BACK[name]
    if name in _BACK:
        return prefix + _BACK[name]
    parts = name.split("/")
    if len(parts) == 3 and parts[0] == "rewards" and parts[2] == "mean":
        return f"{prefix}reward_{parts[1]}"
    return key


def internal_names(row: Mapping[str, Any]) -> dict[str, Any]:
    """`row` with the toolkit's names: the inverse of `trl_names` (a `rewards/<fn>/std` that `trl_names` derived
    from the row's `rewards_<fn>` is left out, so the round trip is exact). A row in the old names comes back
    equal."""
    functions = reward_functions(row)
    out = {}
    for key, value in row.items():
        parts = _split(key)[1].split("/")
        if len(parts) == 3 and parts[0] == "rewards" and parts[2] == "std" and parts[1] in functions:
            continue
        out[internal_name(key)] = value
    return out


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a metrics.jsonl in TRL's names, whether it was written with them or before the rename (old
    names mapped by `trl_names`); lines that are not a JSON object (cut short by a kill) are left out."""
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(trl_names(row))
    return rows
