"""What several examples share: their argument parser (`example_parser`), a staged example's `--stages` and
preset sizes, freeing the GPU between its stages, and reading a seeded benchmark's saved run. Examples run as
scripts (`python examples/x.py`), so their folder is on the path and they `import common`.
"""
from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lmgym.training.flag_parser import SuggestingParser


def example_parser(**kwargs: Any) -> SuggestingParser:
    """An example's or benchmark's parser (`argparse.ArgumentParser`'s keywords): `allow_abbrev` is always off, and
    an unknown flag is one line naming what was meant (lmgym.training.flag_parser)."""
    return SuggestingParser(**kwargs)


def add_preset_sizes(group, presets: dict[str, dict[str, Any]], helps: dict[str, str],
                     floats: Sequence[str] = ()) -> None:
    """`--<name>` for each of a script's preset sizes (`presets[p]["run"][name]`), default None (the preset's
    value), its help naming every preset's value; the names in `floats` parse as float, the others as int."""
    for name, what in helps.items():
        shown = ", ".join(f"{p} {values['run'][name]}" for p, values in presets.items())
        group.add_argument(f"--{name}", type=float if name in floats else int, default=None,
                           help=f"{what} (default: {shown})")


def preset_sizes(args: argparse.Namespace, sizes: dict[str, Any]) -> dict[str, Any]:
    """Each of a preset's sizes: its flag where given, else the preset's value."""
    return {name: value if getattr(args, name, None) is None else getattr(args, name)
            for name, value in sizes.items()}


def parse_stages(text: str, stages: Sequence[str], flag: str = "--stages") -> list[str]:
    """A multi-stage example's --stages (or another `flag` naming some of `stages`): names from `stages`,
    comma-separated, or "all" (every stage, in order); anything else is one ValueError line naming the choices."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    if names == ["all"]:
        return list(stages)
    unknown = [s for s in names if s not in stages]
    if unknown or not names:
        raise ValueError(f"{flag}: {', '.join(map(repr, unknown)) or 'none given'}; choose from "
                         f"{', '.join(stages)} (or all)")
    return names


def release_memory() -> None:
    """Between a multi-stage example's stages: collect the last stage's models and return the GPU's cached
    blocks, before the next stage loads its own."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def saved_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings a seeded benchmark's saved run records and a later call must share to reuse it (its
    `--learning-rate` and `--eval-episodes`)."""
    return {"learning_rate": args.learning_rate, "eval_episodes": args.eval_episodes}


def run_movement(rows: Sequence[dict]) -> dict[str, float | None]:
    """How far a seeded benchmark's run moved its policy, from its iterations' metrics: the mean gradient norm
    (`grad_norm`) and the mean KL to the reference over the last 10 iterations (`kl_last10`); None where the rows
    lack the metric."""
    def mean(values: list[float]) -> float | None:
        return sum(values) / len(values) if values else None

    norms = [float(r["grad_norm"]) for r in rows if isinstance(r.get("grad_norm"), (int, float))]
    kls = [float(r["kl"]) for r in rows if isinstance(r.get("kl"), (int, float))]
    return {"grad_norm": mean(norms), "kl_last10": mean(kls[-10:])}


def movement_cells(result: dict) -> str:
    """A run's `run_movement` as two table cells ("grad norm | KL, last 10"), "-" for a run saved without them."""
    norm, kl = result.get("grad_norm"), result.get("kl_last10")
    return f"{'-' if norm is None else format(norm, '.3f')} | {'-' if kl is None else format(kl, '.4f')}"


def seed_pooled_line(out: Path, results: Sequence[dict], method: str, baseline: str,
                     key: str = "method") -> str | None:
    """A seeded benchmark's method against its baseline paired over problems, on the seeds both ran among
    `results` (each a dict with `key` naming its method, and `seed`): each held-out problem's share right after
    training averaged over those seeds, from the runs' `<out>/<name>-seed<k>/after.problems.jsonl`, and the paired
    bootstrap 95% interval of the difference (evaluation.seed_mean_paired). None when a run kept no records (runs
    saved before they were kept)."""
    from lmgym.core.problem_records import read_problem_records
    from lmgym.evaluation import interval_text, seed_mean_paired

    ran = {name: {r["seed"] for r in results if r[key] == name} for name in (method, baseline)}
    seeds = sorted(ran[method] & ran[baseline])
    paths = {name: [out / f"{name}-seed{seed}" / "after.problems.jsonl" for seed in seeds]
             for name in (method, baseline)}
    if not seeds or not all(p.is_file() for group in paths.values() for p in group):
        return None
    runs = {name: [read_problem_records(p) for p in group] for name, group in paths.items()}
    d = seed_mean_paired(runs[method], runs[baseline])
    return (f"{method} - {baseline}: {interval_text(d.difference, d.low, d.high)} points (each of {d.problems} "
            f"held-out problems' share right over {len(seeds)} seeds; paired bootstrap 95% over problems)")


def read_saved_run(path: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """A run saved by an earlier (or parallel) call of a seeded benchmark, refused in one line when it was made
    with other `settings` (a learning rate, an evaluation size) than this call's: a summary mixing them would compare
    unlike runs. A setting the saved run does not record is not checked (runs saved before it was recorded)."""
    saved = json.loads(path.read_text())
    for name, value in settings.items():
        if name in saved and saved[name] != value:
            raise SystemExit(f"{path}: saved with {name} {saved[name]}, this call asks {value}; "
                             "give another --out or the same settings")
    return saved
