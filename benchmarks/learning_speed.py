"""How fast GRPO and PPO learn two-digit sums: held-out greedy accuracy against seconds of training.

    python benchmarks/learning_speed.py --seconds 120 --eval-every 10 --out runs/learning_speed

GRPO runs the quickstart's GPU preset (examples/quickstart.py: 16 prompts x 8, 64 new tokens, lr 5e-5,
beta 0.04); PPO the settings of benchmarks/ppo_vs_grpo_arithmetic.py (128 prompts x 1, 2 epochs x 2
minibatches, lr 2e-5, value lr 1e-4, beta 0.04). Each trains on `Arithmetic-v0` level 1 until
`--seconds` of training have passed: the clock runs during `train_iteration` only (sampling, scoring,
reference, update; the first iterations' compilation included), not during the held-out evaluations
(256 problems never trained on, greedy) every `--eval-every` iterations. Reports each evaluation with
the training seconds before it and the first one at or above `--target`.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))  # examples import their `common`

from benchmarks.ppo_vs_grpo_arithmetic import SETTINGS  # noqa: E402
from examples.common import example_parser  # noqa: E402
from examples.quickstart import PRESETS  # noqa: E402
from lmgym.algorithms import GRPO, PPO, GRPOConfig, PPOConfig  # noqa: E402
from lmgym.envs import make  # noqa: E402
from lmgym.evaluation import evaluate  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL, HFPolicy  # noqa: E402

GRPO_SETTINGS = {k: v for k, v in PRESETS["gpu"].items()
                 if k not in ("train_iterations", "output_dir", "eval_at_start")}


def build(name: str, out: Path, seed: int, overrides: dict):
    policy = HFPolicy(EMBEDDED_MODEL)
    train_env = make("Arithmetic-v0", level=1, split="train")
    common = dict(train_iterations=10**6, output_dir=str(out / name), seed=seed, eval_at_start=False, progress=False)
    if name == "GRPO":
        return GRPO(policy, train_env, GRPOConfig(**common, **{**GRPO_SETTINGS, **overrides}))
    _, _, values = SETTINGS["PPO"]
    values = dict(max_new_tokens=64, temperature=1.0, eval_episodes=256, **values)
    return PPO(policy, train_env, PPOConfig(**common, **{**values, **overrides}))


def parse_overrides(pairs: list[str]) -> dict:
    """["minibatch_size=128", "learning_rate=3e-5"] -> a dict of config values (numbers parsed)."""
    out = {}
    for pair in pairs:
        key, _, text = pair.partition("=")
        out[key] = json.loads(text) if text.replace(".", "", 1).replace("e-", "", 1).isdigit() else text
    return out


def run(name: str, seconds: float, eval_every: int, target: float, out: Path, seed: int,
        overrides: dict | None = None) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    algo = build(name, out, seed, overrides or {})
    test_env = make("Arithmetic-v0", level=1, split="test")
    c = algo.config

    def accuracy() -> float:
        return evaluate(algo.policy, test_env, c.eval_episodes, c.max_new_tokens)["accuracy"]

    evals = [{"iteration": 0, "train_s": 0.0, "accuracy": accuracy()}]
    trained, rows = 0.0, []
    while trained < seconds:
        start = time.perf_counter()
        metrics = algo.train_iteration()
        algo.iteration += 1
        trained += time.perf_counter() - start
        rows.append({k: metrics[k] for k in ("reward_mean", "completion_length", "time_sample", "time_prepare",
                                            "time_update") if k in metrics} | {"iteration": algo.iteration,
                                                                                 "train_s": trained})
        if algo.iteration % eval_every == 0 or trained >= seconds:
            evals.append({"iteration": algo.iteration, "train_s": trained, "accuracy": accuracy()})
            print(name, json.dumps(evals[-1]), flush=True)
    reached = next((e for e in evals if e["accuracy"] >= target), None)
    summary = {"algorithm": name, "seconds": seconds, "target": target, "first_at_target": reached, "evals": evals,
               "iterations": algo.iteration, "config": c.to_dict()}
    (out / f"{name}_iterations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    print("RESULT " + json.dumps({k: v for k, v in summary.items() if k not in ("config", "evals")}), flush=True)
    return summary


def main() -> None:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithms", nargs="+", default=["GRPO", "PPO"], choices=["GRPO", "PPO"])
    parser.add_argument("--seconds", type=float, default=120.0, help="training seconds per algorithm")
    parser.add_argument("--eval-every", type=int, default=10, help="iterations between held-out evaluations")
    parser.add_argument("--target", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/learning_speed")
    parser.add_argument("--set", nargs="*", default=[], metavar="FIELD=VALUE",
                        help="config overrides for every algorithm run (e.g. minibatch_size=128)")
    args = parser.parse_args()
    out = Path(args.out)
    results = [run(name, args.seconds, args.eval_every, args.target, out, args.seed, parse_overrides(args.set))
               for name in args.algorithms]
    (out / "learning_speed.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
