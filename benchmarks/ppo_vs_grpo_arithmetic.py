"""PPO against GRPO on Arithmetic-v0 with the embedded model, at the same number of sampled tokens.

    python benchmarks/ppo_vs_grpo_arithmetic.py --token-budget 300000 --out runs/ppo_vs_grpo

Both sample 128 episodes per iteration (GRPO: 16 prompts x 8; PPO: 128 prompts x 1) with up to 64 new
tokens, and train until the completion tokens they sampled reach the budget. Held-out greedy accuracy
(256 two-digit sums never trained on) is measured before and after; KL, entropy, reward and accuracy
curves are drawn against sampled tokens in one PNG.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.common import example_parser  # noqa: E402
from lmgym.algorithms import GRPO, PPO, GRPOConfig, PPOConfig  # noqa: E402
from lmgym.envs import make  # noqa: E402
from lmgym.evaluation import evaluate  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL, HFPolicy  # noqa: E402

COMMON = dict(max_new_tokens=64, temperature=1.0, eval_at_start=False, progress=False, eval_episodes=256)
SETTINGS = {
    "GRPO": (GRPO, GRPOConfig, dict(prompts_per_iteration=16, samples_per_prompt=8, learning_rate=5e-5,
                                    kl_coeff=0.04, micro_batch_size=128)),
    "PPO": (PPO, PPOConfig, dict(prompts_per_iteration=128, samples_per_prompt=1, learning_rate=2e-5,
                                 value_learning_rate=1e-4, kl_coeff=0.04, update_epochs=2, minibatch_size=64,
                                 micro_batch_size=64)),
}


def run(name: str, budget: int, out: Path, max_iterations: int, seed: int, model: str, eval_episodes: int) -> dict:
    algo_cls, config_cls, values = SETTINGS[name]
    policy = HFPolicy(model)
    train_env, test_env = make("Arithmetic-v0", split="train"), make("Arithmetic-v0", split="test")
    config = config_cls(train_iterations=max_iterations, output_dir=str(out / name), seed=seed,
                        **{**COMMON, "eval_episodes": eval_episodes}, **values)
    before = evaluate(policy, test_env, config.eval_episodes, config.max_new_tokens)["accuracy"]
    algo = algo_cls(policy, train_env, config)
    rows, sampled, start = [], 0, time.perf_counter()
    while sampled < budget and algo.iteration < max_iterations:
        m = algo.train_iteration()
        algo.iteration += 1
        sampled += int(round(m["completion_length"] * config.batch_size))
        m.update(iteration=algo.iteration, sampled_tokens=sampled)
        m.pop("rewards", None)
        rows.append(m)
    train_minutes = (time.perf_counter() - start) / 60
    after = evaluate(policy, test_env, config.eval_episodes, config.max_new_tokens)["accuracy"]
    (out / f"{name}_metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {"algorithm": name, "accuracy_before": before, "accuracy_after": after, "iterations": algo.iteration,
               "sampled_tokens": sampled, "train_minutes": train_minutes, "config": config.to_dict()}
    print("RESULT " + json.dumps({k: v for k, v in summary.items() if k != "config"}), flush=True)
    return summary


def plot(out: Path, names: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(20, 4.5))
    for name in names:
        rows = [json.loads(line) for line in (out / f"{name}_metrics.jsonl").read_text().splitlines()]
        x = [r["sampled_tokens"] for r in rows]
        for ax, key in zip(axes, ("reward_mean", "kl", "entropy", "completion_length")):
            ax.plot(x, [r.get(key, float("nan")) for r in rows], label=name)
            ax.set_title(key + (" (k3 estimate, symlog scale)" if key == "kl" else ""))
            ax.set_xlabel("sampled completion tokens")
            if key == "kl":
                ax.set_yscale("symlog", linthresh=0.1)
    for ax in axes:
        ax.legend()
        ax.grid(alpha=0.3)
    fig.suptitle("PPO vs GRPO on Arithmetic-v0 (SmolLM2-135M-Instruct), same sampled-token budget")
    fig.tight_layout()
    fig.savefig(out / "ppo_vs_grpo.png", dpi=100)


def main() -> None:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--token-budget", type=int, default=300_000)
    parser.add_argument("--max-iterations", type=int, default=400)
    parser.add_argument("--algorithms", nargs="+", default=["GRPO", "PPO"], choices=sorted(SETTINGS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/ppo_vs_grpo")
    parser.add_argument("--model", default=EMBEDDED_MODEL)
    parser.add_argument("--eval-episodes", type=int, default=256)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summaries = [run(name, args.token_budget, out, args.max_iterations, args.seed, args.model, args.eval_episodes)
                 for name in args.algorithms]
    (out / "summary.json").write_text(json.dumps(summaries, indent=2))
    plot(out, args.algorithms)


if __name__ == "__main__":
    main()
