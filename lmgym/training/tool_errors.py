"""Tool calls that failed because the tool could not run (the env's ``info["tool_errors"]``, e.g. a document
store whose search raised): counted in each iteration's and evaluation's metrics and warned about once a run.

Such a failure reaches the model as an error result and training goes on, so without a count it is silent:
a run whose every search fails trains on nothing (MRR 0). Metrics, only for envs that report
``tool_errors`` (ToolEnv and its subclasses): ``tool_errors``, the failed calls of the batch, and
``tool_error_rate``, failed calls over all tool calls (``info["tool_calls"]``).
"""
from __future__ import annotations

from collections.abc import Sequence

from lmgym.training.guards import warn
from lmgym.buffers import Trajectory


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
