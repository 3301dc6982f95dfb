"""Dense-reward GRPO (verifier step credit, refreshed verifier) against outcome-only GRPO at one sampled-token budget.

    python benchmarks/dense_vs_outcome.py --preset gpu --verifier runs/verifier_loop/verifier \
        --out runs/dense_vs_outcome
    python benchmarks/dense_vs_outcome.py --preset cpu --out runs/dense_vs_outcome_cpu     # tiny model, smoke run

Both methods start from the same model on `Arithmetic-v0` (stepwise, one line per action) and train until the
tokens the policy SAMPLED reach `--token-budget` (the verifier's refresh samples nothing: its labels are the env's
verdicts on the episodes already sampled). "dense" is GRPO with `prm_credit="progress"` (algorithms/prm/step_credit.py)
and the verifier refreshed every `--refresh-every` iterations (algorithms/prm/refresh.py); "outcome" is plain
GRPO. Each runs with `--seeds` seeds; held-out greedy accuracy on the level's test split (never trained on) is
measured before and after. The verifier is a folder (examples/verifier_loop.py writes one) or, without
`--verifier`, a PRM made from the policy with a zero head, trained only by the online refresh (PRIME's design).
Writes results.json (every run, the per-method mean and spread, and dense against outcome: the difference of the
means with Welch's t 95% interval over seeds, evaluation/statistics.py `compare_seeds`) and results.md; the share of
mixed groups (a group whose rewards are not all equal: GRPO's only signal) is kept per run. Five seeds by default.
A regime with room to learn (issue 36): --model a budgeted SFT (examples/verifier_loop.py --second_policy sft writes
one) whose greedy accuracy on the level is 15-50%, so groups are mixed. Each run's own result goes to
<out>/<method>-seed<k>/result.json (each held-out problem's outcome before and after beside it, in
before/after.problems.jsonl: benchmarks/report.py recomputes from them; each iteration's metrics in
metrics.jsonl), and a saved run is read rather than trained again, so seeds can run in parallel processes
(`--methods dense --seeds 1 --first-seed 2`) and a last plain invocation summarises them.
"""
from __future__ import annotations

import argparse
import json
import statistics
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
from lmgym.algorithms import GRPO, GRPOConfig  # noqa: E402
from lmgym.core.atomic_io import atomic_write_text  # noqa: E402
from lmgym.envs import make  # noqa: E402
from lmgym.evaluation import compare_seeds, evaluate, interval_text  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL, HFPolicy, ProcessRewardModel  # noqa: E402

# gpu: one GPU, the embedded model; cpu: the tiny model built in code, seconds per run. The verifier's refresh trains
# 64 samples a step in micro-batches of refresh_micro_batch_size. At the refresh's default 8 a dense iteration took
# 3.3x an outcome one's time on an H200 (twenty-ninth session); the refresh's 32 forward/backward passes (16 an
# iteration, against the policy update's two) are the likely cause, not profiled on the GPU
PRESETS: dict[str, dict] = {
    "gpu": dict(model=EMBEDDED_MODEL, level=3, token_budget=300_000, eval_episodes=256, max_new_tokens=48,
                prompts_per_iteration=16, samples_per_prompt=8, micro_batch_size=64, learning_rate=5e-5,
                refresh_steps=4, refresh_samples=64, refresh_micro_batch_size=32, max_iterations=400),
    "cpu": dict(model="tiny", level=2, token_budget=200, eval_episodes=4, max_new_tokens=4,
                prompts_per_iteration=2, samples_per_prompt=2, micro_batch_size=4, learning_rate=1e-3,
                refresh_steps=1, refresh_samples=4, refresh_micro_batch_size=2, max_iterations=20),
}
METHODS = ("outcome", "dense")


def load_policy(model: str):
    if model == "tiny":
        from lmgym.policies import build_tiny_model, build_tiny_tokenizer

        tokenizer = build_tiny_tokenizer()
        return HFPolicy(build_tiny_model(tokenizer, seed=0), tokenizer, device="cpu")
    return HFPolicy(model)


def config_for(method: str, seed: int, args: argparse.Namespace, out: Path) -> GRPOConfig:
    values = dict(train_iterations=args.max_iterations, seed=seed, output_dir=str(out / f"{method}-seed{seed}"),
                  prompts_per_iteration=args.prompts_per_iteration, samples_per_prompt=args.samples_per_prompt,
                  max_new_tokens=args.max_new_tokens, micro_batch_size=args.micro_batch_size,
                  learning_rate=args.learning_rate, kl_coeff=0.04, temperature=1.0, eval_at_start=False,
                  progress=False)
    if method == "dense":
        values.update(prm_weight=args.prm_weight, prm_credit="progress",
                      refresh=dict(every=args.refresh_every, steps=args.refresh_steps, labels=args.refresh_labels,
                                   samples_per_step=args.refresh_samples,
                                   micro_batch_size=args.refresh_micro_batch_size))
    return GRPOConfig(**values)


def run(method: str, seed: int, args: argparse.Namespace, out: Path) -> dict:
    """One training run to the token budget; its accuracy before and after, tokens and time."""
    policy = load_policy(args.model)
    env = make("Arithmetic-v0", level=args.level, split="train", mode="stepwise", max_steps=args.max_steps)
    test_env = make("Arithmetic-v0", level=args.level, split="test", mode="stepwise", max_steps=args.max_steps)
    prm = None
    if method == "dense":
        prm = ProcessRewardModel.from_pretrained(args.verifier, device=policy.device) if args.verifier \
            else ProcessRewardModel.from_policy(policy)
    config = config_for(method, seed, args, out)
    records = Path(config.output_dir)  # each problem's greedy outcome before and after, for report.py and pairing
    before = evaluate(policy, test_env, args.eval_episodes, args.max_new_tokens,
                      records_path=records / "before.problems.jsonl")["accuracy"]
    algo = GRPO(policy, env, config, prm=prm)
    sampled, start, rows = 0, time.perf_counter(), []
    while sampled < args.token_budget and algo.iteration < args.max_iterations:
        metrics = algo.run_iteration()
        algo.iteration += 1
        sampled += int(round(metrics["completion_length"] * config.batch_size))  # every sampled token
        rows.append({"iteration": algo.iteration, "sampled_tokens": sampled,
                     **{k: v for k, v in metrics.items() if isinstance(v, (int, float, str))}})
    seconds = time.perf_counter() - start
    # the iterations' scalar metrics (reward, KL, the PRM's scores and refresh), to read why a run went as it did
    atomic_write_text(records / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    mixed = [1.0 - float(r["zero_variance_groups"]) for r in rows if r.get("zero_variance_groups") is not None]
    after = evaluate(policy, test_env, args.eval_episodes, args.max_new_tokens,
                     records_path=records / "after.problems.jsonl")["accuracy"]
    result = {"method": method, "seed": seed, "accuracy_before": before, "accuracy_after": after,
              "iterations": algo.iteration, "sampled_tokens": sampled, "train_seconds": round(seconds, 2),
              "mixed_groups": statistics.fmean(mixed) if mixed else None, **run_movement(rows), **saved_settings(args)}
    print("RESULT " + json.dumps(result), flush=True)
    return result


def summarise(results: list[dict]) -> dict[str, dict]:
    """Per method: held-out accuracy after training, mean, sample std (spread) and min/max over seeds."""
    out = {}
    for method in METHODS:
        accs = [r["accuracy_after"] for r in results if r["method"] == method]
        if accs:
            out[method] = {"seeds": len(accs), "mean": statistics.fmean(accs),
                           "std": statistics.stdev(accs) if len(accs) > 1 else 0.0, "min": min(accs),
                           "max": max(accs), "sampled_tokens": statistics.fmean(
                               r["sampled_tokens"] for r in results if r["method"] == method)}
    return out


def versus(results: list[dict], method: str = "dense", baseline: str = "outcome") -> dict | None:
    """`method` against `baseline` over seeds: the difference of mean held-out accuracy and its Welch t 95%
    interval (None when either has no run)."""
    own = [r["accuracy_after"] for r in results if r["method"] == method]
    base = [r["accuracy_after"] for r in results if r["method"] == baseline]
    if not own or not base:
        return None
    c = compare_seeds(own, base)
    return {"method": method, "baseline": baseline, "difference": c.difference, "low": c.low, "high": c.high,
            "seeds": [c.method.seeds, c.baseline.seeds]}


def markdown(summary: dict[str, dict], results: list[dict], args: argparse.Namespace) -> str:
    lines = [f"Arithmetic-v0 L{args.level} test ({args.eval_episodes} problems), budget {args.token_budget} sampled "
             f"tokens per run, learning rate {args.learning_rate:g}, model {args.model}", "",
             "| method | seeds | accuracy mean | std | min | max | tokens/run |", "|---|---|---|---|---|---|---|"]
    for method, s in summary.items():
        lines.append(f"| {method} | {s['seeds']} | {s['mean']:.1%} | {s['std']:.1%} | {s['min']:.1%} | "
                     f"{s['max']:.1%} | {s['sampled_tokens']:.0f} |")
    compared = versus(results)
    if compared is not None:
        lines += ["", f"dense - outcome: {interval_text(compared['difference'], compared['low'], compared['high'])} "
                      f"points (mean held-out accuracy; Welch t 95% interval over {compared['seeds'][0]} and "
                      f"{compared['seeds'][1]} seeds)"]
        pooled = seed_pooled_line(Path(args.out), results, "dense", "outcome")
        lines += [pooled] if pooled else []
    lines += ["", "| method | seed | before | after | iterations | tokens | seconds | mixed groups | grad norm | KL, "
                  "last 10 |", "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['method']} | {r['seed']} | {r['accuracy_before']:.1%} | {r['accuracy_after']:.1%} | "
              f"{r['iterations']} | {r['sampled_tokens']} | {r['train_seconds']} | "
              f"{'-' if r.get('mixed_groups') is None else format(r['mixed_groups'], '.1%')} | {movement_cells(r)} |"
              for r in results]
    return "\n".join(lines) + "\n"


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default="gpu")
    parser.add_argument("--verifier", default=None, help="PRM folder (examples/verifier_loop.py); none: made from "
                                                         "the policy, trained by the refresh alone")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--seeds", type=int, default=5, help="runs per method, seeds --first-seed onwards (default 5)")
    parser.add_argument("--first-seed", type=int, default=0, help="the first seed (default 0)")
    parser.add_argument("--prm-weight", type=float, default=0.3, help="the step credit's weight (<= 1)")
    parser.add_argument("--refresh-every", type=int, default=2, help="refresh the verifier every N iterations")
    parser.add_argument("--refresh-labels", default="outcome_steps", choices=("outcome", "outcome_steps"))
    parser.add_argument("--max-steps", type=int, default=6, help="actions per episode")
    for name in PRESETS["gpu"]:
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(PRESETS["gpu"][name]), default=None,
                            help=f"(preset gpu {PRESETS['gpu'][name]}, cpu {PRESETS['cpu'][name]})")
    parser.add_argument("--out", default="runs/dense_vs_outcome")
    return parser


def result_file(out: Path, method: str, seed: int) -> Path:
    """Where one run's result is saved; a saved run is not trained again (runs can go in parallel processes
    into one --out, e.g. one seed each, and a last invocation summarises them all)."""
    return out / f"{method}-seed{seed}" / "result.json"


def main(argv: list[str] | None = None) -> dict:
    args = build_parser().parse_args(argv)
    for name, value in PRESETS[args.preset].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for method in args.methods:
            path = result_file(out, method, seed)
            if path.is_file():
                print(f"{method} seed {seed}: saved in {path}, not trained again")
                results.append(read_saved_run(path, saved_settings(args)))
                continue
            result = run(method, seed, args, out)
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, json.dumps(result) + "\n")
            results.append(result)
    summary = summarise(results)
    report = {"settings": {k: v for k, v in vars(args).items()}, "summary": summary, "versus": versus(results),
              "runs": results}
    atomic_write_text(out / "results.json", json.dumps(report, indent=2) + "\n")
    atomic_write_text(out / "results.md", markdown(summary, results, args))
    print(markdown(summary, results, args))
    return report


if __name__ == "__main__":
    main()
