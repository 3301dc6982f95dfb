"""Colocated against asynchronous rollouts on the same GPUs: tokens/s, and held-out accuracy against sampled tokens.

On one 4-GPU host (the GPU command; about 2 x 15 minutes on 4x H200):

    torchrun --nproc_per_node 4 benchmarks/async_rollouts.py --mode colocated --iterations 120 --out runs/async
    torchrun --nproc_per_node 4 benchmarks/async_rollouts.py --mode async --rollout-workers 2 --max-policy-lag 1 \
        --iterations 120 --out runs/async
    python benchmarks/async_rollouts.py --report runs/async

Both runs train GRPO on two-digit sums with the learning-speed harness's settings (benchmarks/learning_speed.py:
the quickstart's GPU preset, 16 prompts x 8 samples, 64 new tokens, lr 5e-5, beta 0.04, `Arithmetic-v0` level 1)
for the same number of iterations and seed. Colocated: 4 ranks each sample and train (DDP). Async
(`rollout_workers: 2`): 2 ranks only sample, 2 only train (DDP), the samplers one policy version behind. Every
`--eval-every` iterations trainer rank 0 measures greedy held-out accuracy (`--eval-episodes` problems of the test
split, never trained on). Each run writes `<out>/<mode>.json`: per iteration the sampled tokens (the ones trained
on; the rollout ranks' in async), the seconds of training so far (`wall_s`: the iterations alone; `all_s`: with the
evaluations and checkpoints between them) and the accuracy where measured. The rollout ranks start at the first
batch, after the evaluation at start; during a later evaluation they may sample the batch they would sample next
anyway (at most `--max-policy-lag` ahead), which the iterations-only figure does not charge them for, hence both.
`--report` prints, for both: tokens/s over the run, both ways (the issue's bar: async >= 1.3x colocated), the
accuracy at each evaluation against tokens sampled and against seconds, the first evaluation at or above
`--target`, and writes `<out>/async_rollouts.png` (both curves, against tokens and against seconds).

The CPU dry run (tiny model built in code, gloo; 2 ranks colocated, 1 rollout + 2 trainer ranks async):

    torchrun --nproc_per_node 2 benchmarks/async_rollouts.py --tiny --mode colocated --iterations 4 \
        --eval-every 2 --eval-episodes 8 --out /tmp/ar
    torchrun --nproc_per_node 3 benchmarks/async_rollouts.py --tiny --mode async --rollout-workers 1 \
        --iterations 4 --eval-every 2 --eval-episodes 8 --out /tmp/ar
    python benchmarks/async_rollouts.py --report /tmp/ar

(run on 2 shared CPU cores, 2026-11-28: 494 tokens each, accuracy 0 throughout as a tiny random model's is, the
async run's policy_lag 0, 1, 1, 1 and nothing dropped; the tokens/s of so short a CPU run mean nothing.)
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))  # examples import their `common`

from examples.common import example_parser  # noqa: E402
from lmgym.algorithms import GRPO, GRPOConfig  # noqa: E402
from lmgym.envs import make  # noqa: E402
from lmgym.training import distributed as dist  # noqa: E402
from lmgym.training.callbacks import TrainerCallback  # noqa: E402

MODES = ("colocated", "async")
TINY = dict(prompts_per_iteration=4, samples_per_prompt=4, max_new_tokens=8, learning_rate=5e-3, kl_coeff=0.04,
            micro_batch_size=16)  # the dry run's settings (CPU, tiny model)


class Clock(TrainerCallback):
    """Per iteration: tokens sampled, seconds of training so far (iterations only: `wall_s`; evaluations and
    checkpoints between them too: `all_s`, from the first iteration's start), accuracy where measured."""

    def __init__(self):
        self.rows: list[dict] = []
        self.wall, self.begun, self.origin = 0.0, 0.0, None

    def on_iteration_begin(self, trainer) -> None:
        self.begun = time.perf_counter()
        self.origin = self.begun if self.origin is None else self.origin

    def on_iteration_end(self, trainer, metrics) -> None:
        now = time.perf_counter()
        self.wall += now - self.begun
        tokens = metrics.get("tokens_per_second", 0.0) * metrics.get("time_sample", 0.0)
        self.rows.append({"iteration": trainer.iteration, "tokens": round(tokens), "wall_s": self.wall,
                          "all_s": now - self.origin})

    def on_evaluate(self, trainer, metrics) -> None:
        if self.rows and "eval_accuracy" in metrics:
            self.rows[-1]["accuracy"] = metrics["eval_accuracy"]


def build(args):
    """GRPO on two-digit sums: the learning-speed harness's settings (or the tiny dry-run ones)."""
    if args.tiny:
        from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
        tok = build_tiny_tokenizer()
        policy, settings = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu"), dict(TINY)
    else:
        from benchmarks.learning_speed import GRPO_SETTINGS
        from lmgym.policies import EMBEDDED_MODEL, HFPolicy
        policy, settings = HFPolicy(EMBEDDED_MODEL), dict(GRPO_SETTINGS)
    settings.update(train_iterations=args.iterations, seed=args.seed, eval_every=args.eval_every,
                    eval_episodes=args.eval_episodes, eval_at_start=True, progress=False, save_every=10**6,
                    output_dir=str(Path(args.out) / args.mode))
    if args.mode == "async":
        settings.update(rollout_workers=args.rollout_workers, max_policy_lag=args.max_policy_lag)
    return GRPO(policy, make("Arithmetic-v0", level=1, split="train"), GRPOConfig(**settings),
                eval_env=make("Arithmetic-v0", level=1, split="test"))


def train(args) -> None:
    dist.init_from_env()
    algo = build(args)
    clock = Clock()
    algo.callbacks.add(clock)
    rows = algo.train()
    if dist.is_main():
        start = next((r.get("eval_accuracy") for r in rows if r.get("iteration") == 0), None)
        summary = {"mode": args.mode, "world": dist.world_size() + args.rollout_workers * (args.mode == "async"),
                   "rollout_workers": args.rollout_workers if args.mode == "async" else 0,
                   "start_accuracy": start, "iterations": clock.rows,
                   "policy_lag": [r.get("policy_lag") for r in rows if "policy_lag" in r],
                   "dropped": sum(r.get("dropped_stale_trajectories", 0) for r in rows)}
        path = Path(args.out) / f"{args.mode}.json"
        path.write_text(json.dumps(summary, indent=1))
        total = sum(r["tokens"] for r in clock.rows)
        print(f"RESULT {args.mode}: {total} tokens in {clock.wall:.1f} s = {total / max(clock.wall, 1e-9):.1f} "
              f"tokens/s; {path}", flush=True)


def curve(summary: dict) -> list[tuple[int, float, float]]:
    """(tokens sampled, wall seconds, accuracy) at each evaluation, the one before training first."""
    points, tokens = [(0, 0.0, summary["start_accuracy"])] if summary["start_accuracy"] is not None else [], 0
    for row in summary["iterations"]:
        tokens += row["tokens"]
        if "accuracy" in row:
            points.append((tokens, row["wall_s"], row["accuracy"]))
    return points


def report(folder: Path, target: float) -> None:
    """The table and the overlay plot of a colocated and an async run in `folder`."""
    runs = {mode: json.loads((folder / f"{mode}.json").read_text()) for mode in MODES}
    rates, overall = {}, {}
    for mode, summary in runs.items():
        last = summary["iterations"][-1]
        total, wall = sum(r["tokens"] for r in summary["iterations"]), last["wall_s"]
        rates[mode], overall[mode] = total / max(wall, 1e-9), total / max(last["all_s"], 1e-9)
        reached = next((p for p in curve(summary) if p[2] >= target), None)
        print(f"{mode:9s} ranks {summary['world']} (rollout {summary['rollout_workers']}): {total} tokens in "
              f"{wall:.1f} s of iterations = {rates[mode]:.1f} tokens/s ({overall[mode]:.1f} over "
              f"{last['all_s']:.1f} s with the evaluations); dropped {summary['dropped']}; first at accuracy >= "
              f"{target}: " + (f"{reached[0]} tokens, {reached[1]:.1f} s" if reached else "not reached"))
        for tokens, seconds, accuracy in curve(summary):
            print(f"    tokens {tokens:>9d}  seconds {seconds:8.1f}  accuracy {accuracy:.3f}")
    print(f"async / colocated tokens/s: {rates['async'] / max(rates['colocated'], 1e-9):.2f}x over the iterations, "
          f"{overall['async'] / max(overall['colocated'], 1e-9):.2f}x with the evaluations (bar: >= 1.3x)")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for mode, summary in runs.items():
        points = curve(summary)
        axes[0].plot([p[0] for p in points], [p[2] for p in points], marker="o", label=mode)
        axes[1].plot([p[1] for p in points], [p[2] for p in points], marker="o", label=mode)
    for ax, label in zip(axes, ("tokens sampled", "training seconds")):
        ax.set_xlabel(label)
        ax.set_ylabel("held-out accuracy")
        ax.legend()
    fig.tight_layout()
    fig.savefig(folder / "async_rollouts.png")
    print(f"plot: {folder / 'async_rollouts.png'}")


def main() -> None:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=MODES, default="colocated")
    parser.add_argument("--rollout-workers", type=int, default=2, help="async: ranks that only sample")
    parser.add_argument("--max-policy-lag", type=int, default=1, help="async: versions the samplers run behind")
    parser.add_argument("--iterations", type=int, default=120)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--eval-episodes", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--target", type=float, default=0.9, help="--report: the accuracy whose first reach it reports")
    parser.add_argument("--tiny", action="store_true", help="the CPU dry run: the tiny model built in code")
    parser.add_argument("--out", default="runs/async_rollouts")
    parser.add_argument("--report", default=None, metavar="FOLDER", help="report the two runs in FOLDER")
    args = parser.parse_args()
    if args.report:
        report(Path(args.report), args.target)
    else:
        train(args)


if __name__ == "__main__":
    main()
