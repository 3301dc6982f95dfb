"""Plain GRPO against GRPO with the PRM as a dense reward and against MCTSSearch, at one sampled-token budget.

    python benchmarks/search_training.py --prm runs/prm/model --level 2 --token-budget 300000 --out runs/search_training
    python benchmarks/search_training.py --runs MCTSSearch --mcts-evaluation prm \
        --prm runs/verifier_loop-gpu/verifiers/prm_soft/model --level 3 --seed 1 --out runs/search_training/seed1

Every run starts from the same model and trains on `Arithmetic-v0` (stepwise, one line per action) until
the tokens it SAMPLED reach the budget: for GRPO the episodes' tokens, for MCTSSearch every token of
its trees (discarded siblings and rollouts included). Held-out greedy accuracy on the level's test
split (problems never trained on) is measured before and after. `--time-limit` stops a run early (its
tokens are reported, so the comparison stays honest). One JSON line per run is printed (RESULT ...).

Seeds (issue 36): each run goes with --seeds seeds from --first-seed (5 by default; --seed S is one seed, S); a
run's result is saved in <out>/<run>-seed<k>/result.json (each held-out problem's outcome before and after beside
it, in before/after.problems.jsonl) and read rather than trained again, so seeds can run in parallel processes and
a last plain call summarises them. summary.json / summary.md: each run's mean held-out
accuracy, its spread over seeds, and its difference from GRPO with Welch's t 95% interval (evaluation/statistics.py
`compare_seeds`); the share of mixed groups (rewards not all equal) of each GRPO run is kept. --model a budgeted
SFT (examples/verifier_loop.py --second_policy sft) starts from a regime with room to learn.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.common import (  # noqa: E402
    example_parser,
    movement_cells,
    read_saved_run,
    run_movement,
    saved_settings,
    seed_pooled_line,
)
from lmgym.algorithms import GRPO, GRPOConfig, MCTSSearch, MCTSSearchConfig  # noqa: E402
from lmgym.core.atomic_io import atomic_write_text  # noqa: E402
from lmgym.envs import make  # noqa: E402
from lmgym.evaluation import compare_seeds, evaluate, interval_text, seed_spread  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL, HFPolicy, ProcessRewardModel  # noqa: E402

COMMON = dict(max_new_tokens=48, eval_at_start=False, progress=False, learning_rate=5e-5, kl_coeff=0.04,
              micro_batch_size=64)
RUNS = {
    "GRPO": (GRPO, GRPOConfig, dict(prompts_per_iteration=16, samples_per_prompt=8, temperature=1.0)),
    "GRPO_PRM": (GRPO, GRPOConfig, dict(prompts_per_iteration=16, samples_per_prompt=8, temperature=1.0,
                                        prm_weight=1.0)),
    "MCTSSearch": (MCTSSearch, MCTSSearchConfig, dict(prompts_per_iteration=16, samples_per_prompt=8,
                                                      temperature=0.8, mcts=dict(simulations=16, expand_k=4,
                                                                                 wave_size=4, evaluation="rollout"))),
}


def sampled_tokens(metrics: dict) -> int:
    """Tokens the iteration sampled: the search's whole trees, else the episodes'."""
    if "search_tokens" in metrics:
        return int(metrics["search_tokens"])
    return int(round(metrics["tokens_per_second"] * metrics["time_sample"]))


def config_for(name: str, args: argparse.Namespace, out: Path) -> GRPOConfig | MCTSSearchConfig:
    """The run's config: RUNS' settings over COMMON's, with this call's seed, learning rate and PRM choices."""
    _, config_cls, values = RUNS[name]
    if name == "GRPO_PRM":
        values = {**values, "prm_weight": args.prm_weight}
    if name == "MCTSSearch":  # the tree's leaf values (rollouts to the end, or the verifier's step scores), the scale
        values = {**values, "mcts": {**values["mcts"], "evaluation": args.mcts_evaluation},
                  "advantage_scaling": args.mcts_advantages}
    return config_cls(train_iterations=args.max_iterations, output_dir=str(out / f"{name}-seed{args.seed}"),
                      seed=args.seed, **{**COMMON, "learning_rate": args.learning_rate}, **values)


def run_settings(name: str, args: argparse.Namespace) -> dict:
    """The settings a saved run records and a later call must share to reuse it: the learning rate and evaluation
    size, and MCTSSearch's advantage scaling."""
    return {**saved_settings(args), **({"advantage_scaling": args.mcts_advantages} if name == "MCTSSearch" else {})}


def run(name: str, args: argparse.Namespace, out: Path) -> dict:
    algo_cls = RUNS[name][0]
    policy = HFPolicy(args.model)
    env = make("Arithmetic-v0", level=args.level, split="train", mode="stepwise", max_steps=args.max_steps)
    test_env = make("Arithmetic-v0", level=args.level, split="test", mode="stepwise", max_steps=args.max_steps)
    config = config_for(name, args, out)
    extra = {}
    if name != "GRPO":
        needs_prm = name == "GRPO_PRM" or config.mcts.evaluation == "prm"
        extra = {"prm": ProcessRewardModel.from_pretrained(args.prm) if needs_prm and args.prm else None}
        if needs_prm and extra["prm"] is None:
            raise SystemExit(f"{name} needs --prm "
                             "(a verifier folder: examples/verifier_loop.py or examples/train_prm.py)")
    records = Path(config.output_dir)  # each problem's greedy outcome before and after, for report.py and pairing
    before = evaluate(policy, test_env, args.eval_episodes, COMMON["max_new_tokens"],
                      records_path=records / "before.problems.jsonl")["accuracy"]
    algo = algo_cls(policy, env, config, **extra)
    rows, sampled, start = [], 0, time.perf_counter()
    while sampled < args.token_budget and algo.iteration < args.max_iterations:
        if time.perf_counter() - start > args.time_limit:
            break
        metrics = algo.run_iteration()
        algo.iteration += 1
        sampled += sampled_tokens(metrics)
        metrics.update(iteration=algo.iteration, sampled_tokens=sampled,
                       seconds=time.perf_counter() - start)
        metrics.pop("rewards", None)
        rows.append({k: v for k, v in metrics.items() if isinstance(v, (int, float, str))})
        print(f"{name} iteration {algo.iteration}: {sampled} tokens, reward {metrics.get('reward_mean', 0):.3f}, "
              f"length {metrics.get('completion_length', 0):.1f}", flush=True)
    train_minutes = (time.perf_counter() - start) / 60
    after = evaluate(policy, test_env, args.eval_episodes, COMMON["max_new_tokens"],
                     records_path=records / "after.problems.jsonl")["accuracy"]
    (out / f"{name}-seed{args.seed}_metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    mixed = [1.0 - r["zero_variance_groups"] for r in rows if isinstance(r.get("zero_variance_groups"), (int, float))]
    summary = {"run": name, "seed": args.seed, "accuracy_before": before, "accuracy_after": after,
               "iterations": algo.iteration, "sampled_tokens": sampled, "train_minutes": round(train_minutes, 2),
               "level": args.level, "mixed_groups": sum(mixed) / len(mixed) if mixed else None, **run_movement(rows),
               **run_settings(name, args)}
    print("RESULT " + json.dumps(summary), flush=True)
    return summary


def summarise(results: list[dict], baseline: str = "GRPO") -> dict[str, dict]:
    """Per run: held-out accuracy after training over seeds (mean, std, min, max), and for every run but the
    baseline its difference from the baseline with Welch's t 95% interval (None without baseline runs)."""
    out = {}
    names = list(dict.fromkeys(r["run"] for r in results))
    base = [r["accuracy_after"] for r in results if r["run"] == baseline]
    for name in names:
        accs = [r["accuracy_after"] for r in results if r["run"] == name]
        spread = seed_spread(accs)
        entry = {"seeds": spread.seeds, "mean": spread.mean, "std": spread.std, "min": spread.low,
                 "max": spread.high, "versus": None}
        if name != baseline and base:
            c = compare_seeds(accs, base)
            entry["versus"] = {"baseline": baseline, "difference": c.difference, "low": c.low, "high": c.high}
        out[name] = entry
    return out


def markdown(summary: dict[str, dict], results: list[dict], out: Path | None = None) -> str:
    lines = ["| run | seeds | accuracy mean | std | min | max | vs GRPO, points [95% CI] |",
             "|---|---|---|---|---|---|---|"]
    for name, s in summary.items():
        vs = s["versus"]
        cell = "-" if vs is None else interval_text(vs["difference"], vs["low"], vs["high"])
        lines.append(f"| {name} | {s['seeds']} | {s['mean']:.1%} | {s['std']:.1%} | {s['min']:.1%} | {s['max']:.1%} "
                     f"| {cell} |")
    pooled = [seed_pooled_line(out, results, name, "GRPO", key="run")
              for name in summary if name != "GRPO"] if out is not None else []
    if any(pooled):  # the same comparisons paired over problems, from the runs' records
        lines += [""] + [line for line in pooled if line]
    lines += ["", "| run | seed | before | after | iterations | tokens | minutes | mixed groups | grad norm | KL, "
                  "last 10 |", "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['run']} | {r['seed']} | {r['accuracy_before']:.1%} | {r['accuracy_after']:.1%} | "
              f"{r['iterations']} | {r['sampled_tokens']} | {r['train_minutes']} | "
              f"{'-' if r.get('mixed_groups') is None else format(r['mixed_groups'], '.1%')} | {movement_cells(r)} |"
              for r in results]
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", nargs="+", default=list(RUNS), choices=list(RUNS))
    parser.add_argument("--prm", default=None, help="PRM folder (GRPO_PRM; MCTSSearch with evaluation prm)")
    parser.add_argument("--prm-weight", type=float, default=1.0, help="GRPO_PRM's prm_weight")
    parser.add_argument("--level", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=6, help="actions per episode")
    parser.add_argument("--token-budget", type=int, default=300_000)
    parser.add_argument("--max-iterations", type=int, default=400)
    parser.add_argument("--time-limit", type=float, default=1e9, help="seconds of training per run, at most")
    parser.add_argument("--eval-episodes", type=int, default=256)
    parser.add_argument("--learning-rate", type=float, default=COMMON["learning_rate"],
                        help=f"every run's (default {COMMON['learning_rate']:g}, tuned from the base model; RL after "
                             "an SFT wants about 2e-6, see examples/pipeline.py's gpu preset)")
    parser.add_argument("--mcts-evaluation", choices=("rollout", "prm"), default="rollout",
                        help="MCTSSearch's leaf values: rollouts, or --prm's scores (examples/verifier_loop.py "
                             "writes a verifier trained on the policy's own samples)")
    parser.add_argument("--mcts-advantages", choices=("rms", "whiten", "none"), default="none",
                        help="MCTSSearch's advantage_scaling (default none: the raw Q differences, a tenth of GRPO's "
                             "step size; rms divides them by their root mean square: 5 seeds on an H200 lost 7.2 "
                             "points to GRPO with it, 4.0 without)")
    parser.add_argument("--seeds", type=int, default=5, help="runs per method, seeds --first-seed onwards (default 5)")
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--seed", type=int, default=None, help="one seed only: --first-seed SEED --seeds 1")
    parser.add_argument("--model", default=EMBEDDED_MODEL)
    parser.add_argument("--out", default="runs/search_training")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    if args.seed is not None:
        args.first_seed, args.seeds = args.seed, 1
    if args.seeds < 1:
        raise SystemExit(f"--seeds must be >= 1, got {args.seeds}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for name in args.runs:
            path = out / f"{name}-seed{seed}" / "result.json"
            if path.is_file():
                print(f"{name} seed {seed}: saved in {path}, not trained again")
                results.append(read_saved_run(path, run_settings(name, args)))
                continue
            result = run(name, argparse.Namespace(**{**vars(args), "seed": seed}), out)
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, json.dumps(result) + "\n")
            results.append(result)
    summary = summarise(results)
    report = {"settings": vars(args), "summary": summary, "runs": results}
    atomic_write_text(out / "summary.json", json.dumps(report, indent=2) + "\n")
    text = (f"Arithmetic-v0 L{args.level} test ({args.eval_episodes} problems), budget {args.token_budget} sampled "
            f"tokens a run, learning rate {args.learning_rate:g}, model {args.model}\n\n"
            + markdown(summary, results, out))
    atomic_write_text(out / "summary.md", text)
    print(text)
    return report


if __name__ == "__main__":
    main()
