"""PNG plots of a run's metrics: reward, accuracy, KL, entropy, completion length, reward distribution."""
from __future__ import annotations

from pathlib import Path

PANELS = [
    ("reward", ["reward_mean"] , "reward (mean of batch)"),
    ("accuracy", ["train_accuracy", "eval_accuracy"], "accuracy"),
    ("kl", ["kl"], "KL to reference"),
    ("entropy", ["entropy"], "token entropy"),
    ("length", ["completion_length"], "completion length (tokens)"),
]


def plot_metrics(rows: list[dict], path: str | Path, title: str = "") -> Path | None:
    """Draw the standard panels from metrics rows; returns the PNG path (None if nothing to plot)."""
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    for ax, (name, keys, label) in zip(axes.flat, PANELS):
        for key in keys:
            points = [(r["iteration"], r[key]) for r in rows if key in r and r[key] is not None]
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, ys, marker="o" if len(points) < 20 else None, label=key)
        ax.set_title(label)
        ax.set_xlabel("iteration")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    ax = axes.flat[-1]
    dists = [(r["iteration"], r["rewards"]) for r in rows if r.get("rewards")]
    if dists:
        step = max(1, len(dists) // 12)
        sel = dists[::step]
        ax.boxplot([d for _, d in sel], positions=[i for i, _ in sel], widths=max(0.5, step * 0.6),
                   showmeans=True, manage_ticks=False)
    ax.set_title("reward distribution per iteration")
    ax.set_xlabel("iteration")
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
