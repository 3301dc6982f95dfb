"""PPO on GSM8K (single turn) with a value head: the model writes a solution ending with "#### <number>".

    python examples/ppo_gsm8k.py --data_path ../shared/data/gsm8k/train.jsonl
    python examples/ppo_gsm8k.py --data_path ../shared/data/gsm8k/train.jsonl --value_model copy   # separate critic
    python examples/ppo_gsm8k.py --data_path ../shared/data/gsm8k/train.jsonl --resume             # continue a run

The value head sits on the policy backbone (`--value_model shared`, one forward pass for log-probs and
values) or on a separate critic (`copy`: a copy of the policy's backbone; or a model path of the same
tokenizer). The reward is the env's outcome reward (1 for a correct final answer) at the last token,
minus beta * (log pi - log pi_ref) at every token (`--kl_in_reward`, default on); advantages are
GAE(gamma, lam) over those token rewards. Every PPOConfig field is a flag (`--update_epochs 2`,
`--dual_clip 3`, ...); `--config file.yaml` sets fields too, and flags override it. Without
--test_data_path, the last --holdout rows of the training file are held back and evaluated.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from common import example_parser  # noqa: E402

from lmgym.algorithms import PPO, PPOConfig  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL, HFPolicy  # noqa: E402
from lmgym.training.cli import (  # noqa: E402
    add_config_arguments,
    config_from_arguments,
    gsm8k_train_test,
    run_with_clear_errors,
    train_and_report,
)
from lmgym.training.distributed import init_from_env  # noqa: E402

SYSTEM_PROMPT = Path(__file__).resolve().parents[1] / "lmgym" / "prompts" / "single_turn_sys.txt"

# one GPU; on 2 CPU cores shrink it: --prompts_per_iteration 8 --max_new_tokens 64 --eval_episodes 32
DEFAULTS = dict(train_iterations=100, prompts_per_iteration=64, samples_per_prompt=1, max_new_tokens=256,
                update_epochs=2, minibatch_size=32, micro_batch_size=16, learning_rate=2e-6,
                value_learning_rate=1e-5, kl_coeff=0.02, gamma=1.0, lam=0.95, eval_every=10, eval_episodes=200,
                save_every=10, output_dir="runs/ppo_gsm8k")


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_path", default=None, help="GSM8K train JSONL (default: openai/gsm8k from the hub)")
    parser.add_argument("--test_data_path", default=None, help="GSM8K JSONL to evaluate on (default: held back)")
    parser.add_argument("--holdout", type=int, default=500, help="training rows held back without a test file")
    parser.add_argument("--model", default=EMBEDDED_MODEL, help="hub name, local folder, or the embedded default")
    parser.add_argument("--system_prompt_path", default=str(SYSTEM_PROMPT), help="system prompt file ('' for none)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest complete checkpoint in <output_dir>/checkpoints")
    add_config_arguments(parser, PPOConfig, DEFAULTS)
    return parser


def main(argv: list[str] | None = None) -> list[dict]:
    init_from_env()  # a torchrun launch joins its process group here (rank 0 alone prints and writes)
    return run_with_clear_errors(lambda: run(build_parser().parse_args(argv)))


def run(args: argparse.Namespace) -> list[dict]:
    config = config_from_arguments(PPOConfig, args, DEFAULTS)  # before any data or model; wandb checked

    train_env, test_env, _, eval_note = gsm8k_train_test(args.data_path, args.test_data_path, args.holdout)
    print(f"note: {eval_note}")
    system_prompt = Path(args.system_prompt_path).read_text().strip() if args.system_prompt_path else None
    policy = HFPolicy(args.model, system_prompt=system_prompt)
    algo = PPO(policy, train_env, config, eval_env=test_env)
    print(f"device={policy.device} model={args.model} value_model={config.value_model} "
          f"train={train_env.num_problems} test={test_env.num_problems} problems, "
          f"{config.prompts_per_iteration} episodes x {config.update_epochs} epochs per iteration")

    rows = train_and_report(algo, args.resume)
    last = rows[-1] if rows else {}
    print(f"last iteration: reward {last.get('reward_mean', float('nan')):.3f}, "
          f"explained variance {last.get('explained_variance', float('nan')):.2f}, KL {last.get('kl', 0.0):.4f}")
    return rows


if __name__ == "__main__":
    main()
