"""PNG plots of a run's metrics: one panel per (name, metric keys, title); RL runs draw reward, accuracy,
KL, entropy, completion length and the reward distribution (`PANELS`), a `Trainer` its own `plot_panels`.

Iteration 0 is the evaluation before training; the x axes tick whole iterations only. Rewards that are
all 0 or 1 are drawn as the fraction of reward-1 episodes per iteration (a box plot of 0/1 values
collapses to a line); other rewards as box plots."""
from __future__ import annotations

from pathlib import Path

PANELS = [
    ("reward", ["reward_mean"] , "reward (mean of batch)"),
    ("accuracy", ["train_accuracy", "eval_accuracy"], "accuracy"),
    ("kl", ["kl"], "KL to reference"),
    ("entropy", ["entropy"], "token entropy"),
    ("length", ["completion_length"], "completion length (tokens)"),
    ("rewards", ["rewards"], "reward distribution per iteration"),  # the per-episode rewards of each iteration
]


def plot_metrics(rows: list[dict], path: str | Path, title: str = "", panels=PANELS) -> Path | None:
    """Draw `panels` from metrics rows; returns the PNG path (None if nothing to plot)."""
    if not rows:
        return None
    import matplotlib.pyplot as plt

    fig = draw_metrics(rows, title, panels)
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def draw_metrics(rows: list[dict], title: str = "", panels=PANELS):
    """`panels` as a matplotlib Figure (Agg backend), three to a row: each draws its metric keys per
    iteration; the panel named "rewards" draws the per-episode rewards of each iteration."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    columns = min(3, len(panels))
    lines = -(-len(panels) // columns)
    fig, axes = plt.subplots(lines, columns, figsize=(5 * columns, 4 * lines), squeeze=False)
    for ax, (name, keys, label) in zip(axes.flat, panels):
        if name == "rewards":
            draw_reward_distribution(ax, rows, label)
            continue
        for key in keys:
            points = [(r["iteration"], r[key]) for r in rows if key in r and r[key] is not None]
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, ys, marker="o" if len(points) < 20 else None, label=key)
        ax.set_title(label)
        if ax.has_data():
            ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    iterations = [r["iteration"] for r in rows if "iteration" in r]
    for ax in axes.flat:  # every panel spans the whole run (iteration 0: the evaluation before training)
        ax.set_xlabel("iteration")
        if iterations:
            ax.set_xlim(min(iterations) - 0.5, max(iterations) + 0.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def draw_reward_distribution(ax, rows: list[dict], label: str) -> None:
    """Per iteration: the fraction of episodes rewarded 1 when every reward is 0 or 1, else box plots."""
    dists = [(r["iteration"], r["rewards"]) for r in rows if r.get("rewards")]
    if dists and is_binary(dists):
        xs = [i for i, _ in dists]
        ax.plot(xs, [sum(d) / len(d) for _, d in dists], marker="o" if len(xs) < 20 else None,
                label="episodes with reward 1")
        ax.set_ylim(-0.05, 1.05)
        ax.legend(fontsize=8)
        ax.set_title("fraction of episodes rewarded 1 per iteration")
    else:
        if dists:
            step = max(1, len(dists) // 12)
            sel = dists[::step]
            ax.boxplot([d for _, d in sel], positions=[i for i, _ in sel], widths=max(0.5, step * 0.6),
                       showmeans=True, manage_ticks=False)
        ax.set_title(label)
    ax.grid(alpha=0.3)


def is_binary(dists: list[tuple[int, list[float]]]) -> bool:
    """True when every logged reward is 0 or 1."""
    return all(r in (0, 1) for _, d in dists for r in d)
