"""End-of-training plots drawn but not rendered: what the suite's runs do unless a test reads the PNGs.

`plot_run` (training/plots.py) draws each figure through `draw_metrics`, then lays it out and writes it: the last
two took ~0.5-1 CPU s a run, most of some test files' time, for PNGs no test reads. `drawn` keeps the first part,
so every trainer's rows still go through the panels' code, and writes nothing. tests/conftest.py installs it for
each test not marked `plots`, tests/two_ranks.py in its spawned ranks; a test that reads some of the PNGs names them
in its mark (`plots("reward_components.png")`) and gets `rendered_only` those."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path


def drawn(rows: list[dict], path: str | Path, title: str = "", panels=None) -> None:
    """`plot_metrics` without the layout pass and the file: the figure drawn from `rows`, then closed."""
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from lmgym.training import plots

    if not rows:
        return None
    tight_layout = Figure.tight_layout
    Figure.tight_layout = lambda self, *args, **kwargs: None
    try:
        figure = plots.draw_metrics(rows, title, plots.PANELS if panels is None else panels)
    finally:
        Figure.tight_layout = tight_layout
    plt.close(figure)
    return None


def rendered_only(names: Iterable[str]) -> Callable[..., Path | None]:
    """`plot_metrics` for a test that reads the PNG files `names` (file names, e.g. "metrics.png"): those rendered
    and written as a run writes them, every other one only `drawn`."""
    from lmgym.training import plots

    real, wanted = plots.plot_metrics, set(names)

    def plot_metrics(rows: list[dict], path: str | Path, title: str = "", panels=None) -> Path | None:
        if Path(path).name not in wanted:
            return drawn(rows, path, title, panels)
        return real(rows, path, title, plots.PANELS if panels is None else panels)

    return plot_metrics
