"""GRPO on GSM8K (single turn): the model writes a whole solution ending with "#### <number>".

    python examples/grpo_gsm8k.py --data_path ../shared/data/gsm8k/train.jsonl
    python examples/grpo_gsm8k.py --config examples/configs/grpo_gsm8k.yaml --data_path ../shared/data/gsm8k/train.jsonl

Every GRPOConfig field is a flag (`--samples_per_prompt 8`, `--kl_coeff 0.04`, ...); a --config YAML file
sets fields too, and flags override it. Without --test_data_path (or with the training file) the last
--holdout rows of the training data are held back, never trained on, and evaluated. The run folder
(--output_dir) gets metrics.jsonl, metrics.png, config.json, checkpoint-N/ and the trained model in model/.
Set RLGYM_TRACEBACK=1 to see tracebacks instead of one-line errors.
"""
from __future__ import annotations

import argparse

from common import example_parser  # noqa: E402

from lmgym.algorithms import GRPO, GRPOConfig  # noqa: E402
from lmgym.envs import DataFileNotFoundError  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL, HFPolicy  # noqa: E402
from lmgym.policies.few_shot import PROMPTS_DIR, read_system_prompt  # noqa: E402
from lmgym.training.cli import (  # noqa: E402
    add_config_arguments,
    config_from_arguments,
    gsm8k_train_test,
    run_with_clear_errors,
    train_and_report,
)
from lmgym.training.distributed import init_from_env  # noqa: E402

DEFAULTS = dict(train_iterations=100, prompts_per_iteration=16, samples_per_prompt=8, max_new_tokens=256,
                kl_coeff=0.04, eval_every=10, eval_episodes=200, eval_at_start=True,
                micro_batch_size=16, save_every=10, output_dir="runs/grpo_gsm8k")


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data_path", default=None,
                        help="GSM8K JSONL to train on (default: openai/gsm8k's train split from the hub)")
    parser.add_argument("--test_data_path", default=None,
                        help="GSM8K JSONL to evaluate on (default: the last --holdout training rows, held back)")
    parser.add_argument("--holdout", type=int, default=500, help="rows held back when there is no test file")
    parser.add_argument("--model", default=EMBEDDED_MODEL, help="hub name, local folder, or the embedded default")
    parser.add_argument("--system_prompt_path", default=str(PROMPTS_DIR / "single_turn_sys.txt"),
                        help="system prompt file")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest complete checkpoint in <output_dir>/checkpoints if there is one")
    add_config_arguments(parser, GRPOConfig, DEFAULTS)
    return parser


def run(args: argparse.Namespace) -> None:
    config = config_from_arguments(GRPOConfig, args, DEFAULTS)  # DEFAULTS < --config file < flags; wandb checked
    system_prompt = read_system_prompt(args.system_prompt_path)
    try:
        train_env, test_env, _, eval_note = gsm8k_train_test(args.data_path, args.test_data_path, args.holdout)
    except DataFileNotFoundError as err:  # from the hub (offline): name this script's flag
        raise DataFileNotFoundError(str(err).replace("data_path=", "--data_path ")) from None
    policy = HFPolicy(args.model, system_prompt=system_prompt)
    algo = GRPO(policy, train_env, config, eval_env=test_env)

    print(f"device={policy.device} model={args.model} train problems={train_env.num_problems} "
          f"{config.prompts_per_iteration} prompts x {config.samples_per_prompt} samples per iteration")
    print(f"note: {eval_note}")
    train_and_report(algo, args.resume)


def main(argv: list[str] | None = None) -> None:
    init_from_env()  # a torchrun launch joins its process group here (rank 0 alone prints and writes)
    run_with_clear_errors(lambda: run(build_parser().parse_args(argv)))


if __name__ == "__main__":
    main()
