"""Plain GRPO against GRPO with the PRM as a dense reward and against MCTSSearch, at one sampled-token budget.

    python benchmarks/search_training.py --prm runs/prm/model --level 2 --token-budget 300000 --out runs/search_training
    python benchmarks/search_training.py --runs MCTSSearch --mcts-evaluation prm \
        --prm runs/verifier_loop-gpu/verifiers/prm_soft/model --level 3 --seed 1 --out runs/search_training/seed1

Every run starts from the same model and trains on `Arithmetic-v0` (stepwise, one line per action) until
the tokens it SAMPLED reach the budget: for GRPO the episodes' tokens, for MCTSSearch every token of
its trees (discarded siblings and rollouts included). Held-out greedy accuracy on the level's test
split (problems never trained on) is measured before and after. `--time-limit` stops a run early (its
tokens are reported, so the comparison stays honest). One JSON line per run is printed (RESULT ...).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.common import example_parser  # noqa: E402
from lmgym.algorithms import GRPO, GRPOConfig, MCTSSearch, MCTSSearchConfig  # noqa: E402
from lmgym.envs import make  # noqa: E402
from lmgym.evaluation import evaluate  # noqa: E402
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


def run(name: str, args: argparse.Namespace, out: Path) -> dict:
    algo_cls, config_cls, values = RUNS[name]
    policy = HFPolicy(args.model)
    env = make("Arithmetic-v0", level=args.level, split="train", mode="stepwise", max_steps=args.max_steps)
    test_env = make("Arithmetic-v0", level=args.level, split="test", mode="stepwise", max_steps=args.max_steps)
    if name == "GRPO_PRM":
        values = {**values, "prm_weight": args.prm_weight}
    if name == "MCTSSearch":  # the tree's leaf values: rollouts to the end, or the verifier's step scores
        values = {**values, "mcts": {**values["mcts"], "evaluation": args.mcts_evaluation}}
    config = config_cls(train_iterations=args.max_iterations, output_dir=str(out / name), seed=args.seed,
                        **COMMON, **values)
    extra = {}
    if name != "GRPO":
        needs_prm = name == "GRPO_PRM" or config.mcts.evaluation == "prm"
        extra = {"prm": ProcessRewardModel.from_pretrained(args.prm) if needs_prm and args.prm else None}
        if needs_prm and extra["prm"] is None:
            raise SystemExit(f"{name} needs --prm "
                             "(a verifier folder: examples/verifier_loop.py or examples/train_prm.py)")
    before = evaluate(policy, test_env, args.eval_episodes, COMMON["max_new_tokens"])["accuracy"]
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
    after = evaluate(policy, test_env, args.eval_episodes, COMMON["max_new_tokens"])["accuracy"]
    (out / f"{name}_metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {"run": name, "accuracy_before": before, "accuracy_after": after, "iterations": algo.iteration,
               "sampled_tokens": sampled, "train_minutes": round(train_minutes, 2), "level": args.level}
    print("RESULT " + json.dumps(summary), flush=True)
    return summary


def main() -> None:
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
    parser.add_argument("--mcts-evaluation", choices=("rollout", "prm"), default="rollout",
                        help="MCTSSearch's leaf values: rollouts, or --prm's scores (examples/verifier_loop.py "
                             "writes a verifier trained on the policy's own samples)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=EMBEDDED_MODEL)
    parser.add_argument("--out", default="runs/search_training")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summaries = [run(name, args, out) for name in args.runs]
    (out / "summary.json").write_text(json.dumps(summaries, indent=2))


if __name__ == "__main__":
    main()
