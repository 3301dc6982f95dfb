"""The metrics an RL iteration and an evaluation log about their episodes: rewards, accuracy, lengths and reward
failures (`episode_metrics`), each reward component's mean and values (`component_means`, `component_metrics`,
from each episode's `outcome.reward_components`), and failed tool calls (`ToolErrorCounter`).

Tool calls can fail because the tool could not run (the env's ``info["tool_errors"]``, e.g. a document store
whose search raised). Such a failure reaches the model as an error result and training goes on, so without a
count it is silent: a run whose every search fails trains on nothing (MRR 0). Metrics, only for envs that report
``tool_errors`` (ToolEnv and its subclasses): ``tool_errors``, the failed calls of the batch, and
``tool_error_rate``, failed calls over all tool calls (``info["tool_calls"]``); warned about once a run.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from lmgym.buffers import Trajectory
from lmgym.buffers.outcome import checked_component
from lmgym.training.guards import reward_failures, warn

RESERVED = ("mean", "std", "failures")  # reward_<name> is already another metric for these


def episode_metrics(trajectories: list[Trajectory], iteration: int, zero_variance: float | None = None) -> dict:
    """Rewards (the env's, combined by `reward_combination`, before KL or length shaping), each reward
    component's mean (`reward_<name>`) and values (`rewards_<name>`), accuracy, lengths, the fraction
    of groups without signal (`zero_variance`, given when several samples share a prompt; left out when None)
    and reward failures (warned about, naming `iteration`, counted from 1)."""
    rewards = [t.env_reward for t in trajectories]
    metrics = {
        "reward_mean": float(np.mean(rewards)), "reward_std": float(np.std(rewards)),
        "train_accuracy": float(np.mean([t.outcome.correct for t in trajectories])),
        "completion_length": sum(t.num_generated_tokens for t in trajectories) / max(len(trajectories), 1),
        "truncated_fraction": float(np.mean([t.truncated for t in trajectories])),
        "rewards": [round(r, 4) for r in rewards],
        **component_metrics(trajectories),
    }
    if zero_variance is not None:
        metrics["zero_variance_groups"] = zero_variance
    failures, first = reward_failures(trajectories)
    metrics["reward_failures"] = failures
    if failures:
        warn(f"iteration {iteration}: a reward function failed on {failures} of {len(trajectories)} episodes "
             f"(scored 0 for that reward); first: {first}")
    return metrics


def component_matrix(rows: Sequence[Mapping[str, float | None]]) -> tuple[list[str], np.ndarray]:
    """(component names in order of first appearance, matrix [len(rows), K]); None or absent -> NaN.
    The metrics below read it, and so does the batch reward combination (lmgym.algorithms.reward_combination)."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    matrix = np.full((len(rows), len(names)), np.nan)
    for i, row in enumerate(rows):
        for k, name in enumerate(names):
            value = checked_component(name, row.get(name))
            if value is not None:
                matrix[i, k] = value
    return names, matrix


def component_means(trajectories: list[Trajectory]) -> dict[str, float]:
    """`reward_<name>`: each reward component's mean over the episodes it applies to (those reporting
    components; None values left out). Empty when no episode has components."""
    return _means(_columns(trajectories))


def component_metrics(trajectories: list[Trajectory]) -> dict:
    """`component_means`, and `rewards_<name>`: each component's per-episode values (None: not applicable),
    for the plots (flat keys of lists, as `rewards`, so wandb logs them as they are)."""
    columns = _columns(trajectories)
    values = {f"rewards_{name}": [None if math.isnan(v) else round(float(v), 4) for v in column]
              for name, column in columns.items()}
    return {**_means(columns), **values} if values else {}


def _means(columns: dict[str, np.ndarray]) -> dict[str, float]:
    """`reward_<name>`: the mean of each column's applicable (non-NaN) values; columns with none are left out."""
    return {f"reward_{name}": float(values[~np.isnan(values)].mean())
            for name, values in columns.items() if (~np.isnan(values)).any()}


def _columns(trajectories: list[Trajectory]) -> dict[str, np.ndarray]:
    """Component name -> its values over the episodes that report components (NaN: not applicable)."""
    rows = [t.outcome.reward_components for t in trajectories if t.outcome.reward_components]
    names, matrix = component_matrix(rows)
    clash = [name for name in names if name in RESERVED]
    if clash:
        raise ValueError(f"reward component {clash[0]!r} would be logged as reward_{clash[0]}, which is another "
                         f"metric; rename the reward function")
    return {name: matrix[:, k] for k, name in enumerate(names)}


def count_tool_errors(trajectories: Sequence[Trajectory]) -> tuple[dict[str, float], str | None]:
    """({"tool_errors": n, "tool_error_rate": n / calls}, the first failure as "tool: error"), or ({}, None)
    when no episode reports tool errors at all (an env without tools)."""
    reported = [t.info for t in trajectories if isinstance(t.info.get("tool_errors"), list)]
    if not reported:
        return {}, None
    errors = [entry for info in reported for entry in info["tool_errors"] if isinstance(entry, dict)]
    calls = sum(int(n) for info in reported for n in (info.get("tool_calls") or {}).values()
                if isinstance(n, (int, float)))
    first = f"{errors[0].get('tool')}: {errors[0].get('error')}" if errors else None
    return {"tool_errors": len(errors), "tool_error_rate": len(errors) / max(calls, len(errors), 1)}, first


class ToolErrorCounter:
    """`count_tool_errors` for a run: the first batch with failures gets one warning; later ones are only
    counted (one counter a run, shared by training and evaluation)."""

    def __init__(self) -> None:
        self.warned = False

    def metrics(self, trajectories: Sequence[Trajectory], where: str) -> dict[str, float]:
        """The tool-error metrics of `trajectories`; warns (once) when some failed. where: e.g. "iteration 3"."""
        metrics, first = count_tool_errors(trajectories)
        if first is not None and not self.warned:
            self.warned = True
            warn(f"{where}: {metrics['tool_errors']} tool call(s) failed (the model saw an error result); first: "
                 f"{first}. Counted as tool_errors in metrics.jsonl; this warning is not repeated in this run")
        return metrics
