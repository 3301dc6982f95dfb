"""End-of-training plots drawn but not rendered: what the suite's runs do unless a test reads the PNGs.

`plot_run` (training/plots.py) draws each figure through `draw_metrics`, then lays it out and writes it: the last
two took ~0.5-1 CPU s a run, most of some test files' time, for PNGs no test reads. `drawn` keeps the first part,
so every trainer's rows still go through the panels' code, and writes nothing. tests/conftest.py installs it for
each test not marked `plots`, tests/two_ranks.py in its spawned ranks."""
from __future__ import annotations

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
