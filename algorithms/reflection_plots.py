"""The turn-k accuracy curve of each stage (base, SFT, DPO, ...) as one PNG: accuracy (%) of the actor's
answer at turn k against k, one line per stage. A flat line is an actor that repeats itself; a rising one,
refinement that fixes answers."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from algorithms.reflection_metrics import turn_accuracy_curve


def plot_turn_accuracy(stages: Mapping[str, Mapping[str, Any] | Sequence[float | None]], path: str | Path,
                       title: str = "") -> Path:
    """Save the curves of ``stages`` (stage name -> a ``turn_metrics``/``evaluate_reflection`` result, or the
    accuracies at turns 1, 2, ... as fractions; None: turn not reached, left out) to ``path``; returns it."""
    from matplotlib.figure import Figure

    if not isinstance(stages, Mapping) or not stages:
        raise ValueError("plot_turn_accuracy: stages must be a non-empty mapping of stage name -> metrics or curve")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    for name, value in stages.items():
        curve = turn_accuracy_curve(value) if isinstance(value, Mapping) else list(value)
        points = [(k, 100 * acc) for k, acc in enumerate(curve, start=1) if acc is not None]
        if not points:
            raise ValueError(f"plot_turn_accuracy: stage {name!r} has no turn accuracy")
        ax.plot([k for k, _ in points], [acc for _, acc in points], marker="o", label=str(name))
    ax.set_xlabel("turn k")
    ax.set_ylabel("accuracy at turn k (%)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title(title or "turn-k accuracy per stage")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path
