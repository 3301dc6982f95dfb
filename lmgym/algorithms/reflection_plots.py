"""The turn-k accuracy curve of each stage (base, SFT, DPO, ...) as one PNG: accuracy (%) of the actor's
answer at turn k against k, one line per stage. A flat line is an actor that repeats itself; a rising one,
refinement that fixes answers."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lmgym.algorithms.reflection_metrics import turn_accuracy_curve
from lmgym.training.plots import save_line_plot


def plot_turn_accuracy(stages: Mapping[str, Mapping[str, Any] | Sequence[float | None]], path: str | Path,
                       title: str = "") -> Path:
    """Save the curves of ``stages`` (stage name -> a ``turn_metrics``/``evaluate_reflection`` result, or the
    accuracies at turns 1, 2, ... as fractions; None: turn not reached, left out) to ``path``; returns it."""
    if not isinstance(stages, Mapping) or not stages:
        raise ValueError("plot_turn_accuracy: stages must be a non-empty mapping of stage name -> metrics or curve")
    lines = {}
    for name, value in stages.items():
        curve = turn_accuracy_curve(value) if isinstance(value, Mapping) else list(value)
        points = [(k, 100 * acc) for k, acc in enumerate(curve, start=1) if acc is not None]
        if not points:
            raise ValueError(f"plot_turn_accuracy: stage {name!r} has no turn accuracy")
        lines[name] = ([k for k, _ in points], [acc for _, acc in points])
    return save_line_plot(lines, path, title or "turn-k accuracy per stage", "turn k", "accuracy at turn k (%)",
                          integer_x=True)
