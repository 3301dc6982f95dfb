"""PNG plots of a run's metrics: one panel per (name, metric keys, title); RL runs draw reward, accuracy,
KL, entropy, completion length and the reward distribution (`PANELS`), a `Trainer` its own `plot_panels`;
a run on CUDA adds its peak GPU memory per phase.
When the episodes report reward components, two more files show each component (seed 001's plots):
reward_components.png (its batch and held-out means per iteration) and reward_distribution.png (its
values per iteration).

Iteration 0 is the evaluation before training; the x axes tick whole iterations only. Rewards that are
all 0 or 1 are drawn as the fraction of reward-1 episodes per iteration (a box plot of 0/1 values
collapses to a line); other rewards as box plots.

The panels name the toolkit's own metric keys; rows in TRL's names (read from a metrics.jsonl: training/
metric_names.py) are mapped back first.

`RunPlots` is the callback by which every `Trainer` draws them when training ends (training/callbacks.py)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from lmgym.training import distributed as dist
from lmgym.training.callbacks import TrainerCallback
from lmgym.training.metric_names import internal_names

PANELS = [
    ("reward", ["reward_mean"] , "reward (mean of batch)"),
    ("accuracy", ["train_accuracy", "eval_accuracy"], "accuracy"),
    ("kl", ["kl"], "KL to reference"),
    ("entropy", ["entropy"], "token entropy"),
    ("length", ["completion_length"], "completion length (tokens)"),
    ("rewards", ["rewards"], "reward distribution per iteration"),  # the per-episode rewards of each iteration
]


def plot_run(rows: list[dict], run_dir: str | Path, title: str = "", panels=PANELS) -> list[Path]:
    """A run folder's plots: metrics.png (`panels`) and, when rows hold reward components
    (`rewards_<name>`), reward_components.png and reward_distribution.png. Returns the files written."""
    run_dir, names = Path(run_dir), component_names(rows)
    written = [plot_metrics(rows, run_dir / "metrics.png", title, [*panels, *memory_panels(rows)])]
    if names:
        written += [plot_metrics(rows, run_dir / "reward_components.png", f"{title}: reward components",
                                 progression_panels(names)),
                    plot_metrics(rows, run_dir / "reward_distribution.png", f"{title}: reward distributions",
                                 distribution_panels(names))]
    return [path for path in written if path is not None]


class RunPlots(TrainerCallback):
    """When training ends (not on Ctrl-C), rank 0 draws the run's plots into `output_dir` (`plot_run`), with the
    trainer's `plot_panels` and `title()`."""

    def on_train_end(self, trainer, rows: list[dict] | None) -> None:
        if rows is not None and dist.is_main():
            plot_run(rows, trainer.config.output_dir, title=trainer.title(), panels=trainer.plot_panels)


def memory_panels(rows: list[dict]) -> list[tuple[str, list[str], str]]:
    """A panel of the peak GPU memory allocated in each phase and the iteration, when the rows hold it (runs on
    CUDA: training/phase_memory.py); none otherwise."""
    keys = list(dict.fromkeys(key for r in rows for key in r if key.startswith("memory_peak_gb")))
    return [("memory", keys, "peak GPU memory allocated (GB)")] if keys else []


def component_names(rows: list[dict]) -> list[str]:
    """Reward component names found in rows, in order of first appearance."""
    return list(dict.fromkeys(key[len("rewards_"):] for r in rows for key in r if key.startswith("rewards_")))


def progression_panels(names: list[str]) -> list[tuple[str, list[str], str]]:
    """The reward and each component per iteration, a panel each: its batch mean (`reward_<name>`) and
    its held-out mean (`eval_reward_<name>`, when evaluated)."""
    return [("reward", ["reward_mean"], "reward (mean of batch)"),
            *((f"reward_{name}", [f"reward_{name}", f"eval_reward_{name}"], name) for name in names)]


def distribution_panels(names: list[str]) -> list[tuple[str, list[str], str]]:
    """The reward's and each component's per-episode values per iteration, a panel each."""
    return [("rewards", ["rewards"], "reward distribution per iteration"),
            *((f"rewards/{name}", [], f"{name} distribution per iteration") for name in names)]


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
    iteration; the panel named "rewards" draws the per-episode rewards of each iteration, one named
    "rewards/<component>" that component's per-episode values."""
    import matplotlib

    rows = [internal_names(row) for row in rows]  # rows read from a metrics.jsonl (TRL's names) draw too
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    columns = min(3, len(panels))
    lines = -(-len(panels) // columns)
    fig, axes = plt.subplots(lines, columns, figsize=(5 * columns, 4 * lines), squeeze=False)
    for ax, (name, keys, label) in zip(axes.flat, panels):
        if name == "rewards" or name.startswith("rewards/"):
            component = name.partition("/")[2]
            draw_reward_distribution(ax, distributions(rows, component), label,
                                     f"episodes with {component} = 1" if component else "episodes rewarded 1")
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


def distributions(rows: list[dict], component: str = "") -> list[tuple[int, list[float]]]:
    """(iteration, per-episode values) of each row that has some: the rewards, or a component's
    applicable values (`rewards_<component>`)."""
    key = f"rewards_{component}" if component else "rewards"
    values = [(r["iteration"], [v for v in r.get(key) or [] if v is not None]) for r in rows]
    return [(i, d) for i, d in values if d]


def draw_reward_distribution(ax, dists: list[tuple[int, list[float]]], label: str,
                             ones: str = "episodes rewarded 1") -> None:
    """Per iteration: the fraction of `ones` when every value is 0 or 1, else box plots of the values."""
    if dists and is_binary(dists):
        xs = [i for i, _ in dists]
        ax.plot(xs, [sum(d) / len(d) for _, d in dists], marker="o" if len(xs) < 20 else None, label=ones)
        ax.set_ylim(-0.05, 1.05)
        ax.legend(fontsize=8)
        ax.set_title(f"fraction of {ones} per iteration")
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


def save_line_plot(lines: Mapping[str, tuple[Sequence[float], Sequence[float]]], path: str | Path, title: str,
                   xlabel: str, ylabel: str, log2_x: bool = False, integer_x: bool = False) -> Path:
    """One PNG of named lines (name -> x values, y values), a marker on each point, a grid and a legend; the x
    axis in powers of 2 (`log2_x`) or ticked at whole numbers only (`integer_x`). Parent folders are made."""
    from matplotlib.figure import Figure

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    for name, (xs, ys) in lines.items():
        ax.plot(xs, ys, marker="o", label=str(name))
    if log2_x:
        ax.set_xscale("log", base=2)
    if integer_x:
        ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path
