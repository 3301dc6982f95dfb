"""Turn W1 result files (from w1_benchmark.py) into benchmarks/RESULTS.md's table and a PNG.

    python benchmarks/w1_report.py benchmarks/results/w1_h200_*.json --png benchmarks/w1.png
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path


def load(paths: list[str]) -> tuple[dict | None, list[dict], list[dict]]:
    toolkit, trl, sampling = None, [], []
    for p in paths:
        data = json.loads(Path(p).read_text())
        toolkit = data.get("toolkit", toolkit)
        trl += data.get("trl", [])
        sampling += data.get("sampling", [])
    return toolkit, trl, sampling


def table(toolkit: dict, trl: list[dict]) -> str:
    best = min(trl, key=lambda r: r["median_step_s"])
    lines = ["| run | median s/step | completion tokens/s | peak GPU memory (GB) | tokens/s vs TRL best "
             "| memory vs TRL best |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    rows = [("this toolkit (GRPO, fast decode)", toolkit)] + [(f"TRL GRPOTrainer, {r['mode']}", r) for r in trl]
    for name, r in rows:
        lines.append(f"| {name} | {r['median_step_s']:.2f} | {r['completion_tok_per_s']:,.0f} "
                     f"| {r['peak_mem_gb']:.1f} | "
                     f"{r['completion_tok_per_s'] / best['completion_tok_per_s']:.2f}x | "
                     f"{r['peak_mem_gb'] / best['peak_mem_gb']:.2f}x |")
    return "\n".join(lines)


def plot(toolkit: dict, trl: list[dict], sampling: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(20, 4.5))
    runs = [("toolkit", toolkit)] + [(f"TRL {r['mode']}", r) for r in trl]
    ax = axes[0]
    ax.bar([n for n, _ in runs], [r["completion_tok_per_s"] for _, r in runs], color=["C2"] + ["C0"] * len(trl))
    ax.set_title("W1 completion tokens/s (higher is better)")
    ax2 = axes[1]
    ax2.bar([n for n, _ in runs], [r["peak_mem_gb"] for _, r in runs], color=["C2"] + ["C0"] * len(trl))
    ax2.set_title("peak GPU memory, GB (lower is better)")
    ax3 = axes[2]
    for name, r in runs:
        ax3.plot(range(1, len(r["reward"]) + 1), r["reward"], marker="o", label=name)
    ax3.set_title("mean reward per step (same prompts, same settings)")
    ax3.set_xlabel("step")
    ax3.legend(fontsize=8)
    ax4 = axes[3]
    for name, r in runs:
        ax4.plot(range(1, len(r["mean_completion_len"]) + 1), r["mean_completion_len"], marker="o", label=name)
    ax4.set_title("mean completion length per step (tokens)")
    ax4.set_xlabel("step")
    ax4.set_ylim(0, 256)
    ax4.legend(fontsize=8)
    for a in axes[:2]:
        a.tick_params(axis="x", rotation=20)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False)  # toolkit-free script: no lmgym.training.cli.example_parser
    parser.add_argument("results", nargs="+")
    parser.add_argument("--png", default="benchmarks/w1.png")
    args = parser.parse_args()
    toolkit, trl, sampling = load(args.results)
    print(table(toolkit, trl))
    for row in sampling:
        print(f"sampling batch {row['batch']}: toolkit {row['toolkit']['tok_per_s']:,.0f} tok/s, "
              f"model.generate {row['generate']['tok_per_s']:,.0f} tok/s ({row['speedup']:.2f}x)")
    plot(toolkit, trl, sampling, args.png)
    print(f"plot: {args.png}")


if __name__ == "__main__":
    main()
