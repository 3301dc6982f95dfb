"""Supervised fine-tuning (SFT) on gold solutions or your own data, e.g. as a warm-up before RL.

    python examples/sft.py                                   # CPU-sized: Arithmetic-v0 level 3 gold solutions
    python examples/sft.py --preset gpu --data gsm8k --data_path ../shared/data/gsm8k/train.jsonl
    python examples/sft.py --data my_data.jsonl              # {"prompt", "completion"} or {"messages"} rows

Data (--data):
- arithmetic: gold step-by-step solutions of Arithmetic-v0 --level train problems (--train_examples of
  them; 0: all); held out: its test split (--held_out_examples of it);
- gsm8k: GSM8K train solutions (steps without calculator annotations, then "#### N") as completions of the
  GSM8K env's prompts; --data_path (None: the hub); held out: --test_data_path, else the last --holdout
  rows, never trained on;
- a path: a JSONL file or a saved `datasets` folder (else a hub data set name); a seeded
  --held_out_fraction is held out.
It prints the held-out loss (NLL per completion token) before and after training and, with
--eval_episodes N > 0 on arithmetic or gsm8k, the greedy accuracy on N held-out env problems before and
after. The run folder gets metrics, plot, checkpoints and the trained model in model/ (a Hugging Face
folder: the next stage loads it with --model). Every SFTConfig field is also a flag.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from common import example_parser  # noqa: E402

from lmgym.algorithms import SFT, SFTConfig  # noqa: E402
from lmgym.envs import make  # noqa: E402
from lmgym.evaluation import evaluate  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL, HFPolicy, LoraSettings  # noqa: E402
from lmgym.traindata.sft_data import (  # noqa: E402
    arithmetic_sft_examples,
    gsm8k_sft_examples,
    load_sft_examples,
    split_examples,
)
from lmgym.training.cli import (  # noqa: E402
    add_config_arguments,
    config_from_arguments,
    gsm8k_train_test,
    run_with_clear_errors,
)

PRESETS = {
    "cpu": dict(train_iterations=30, examples_per_iteration=16, max_length=256, micro_batch_size=8,
                learning_rate=5e-5, eval_every=10, eval_at_start=True, output_dir="runs/sft-cpu"),
    # GSM8K's 7,473 train solutions, about 2 epochs at 64 a step (the TRL SFTTrainer bar: lr 3e-5)
    "gpu": dict(train_iterations=230, examples_per_iteration=64, max_length=1024, micro_batch_size=16,
                learning_rate=3e-5, eval_every=50, eval_at_start=True, output_dir="runs/sft-gpu"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default=None,
                        help="cpu or gpu (default: gpu when CUDA is available)")
    parser.add_argument("--model", default=EMBEDDED_MODEL, help="hub name, local path, or the embedded default")
    parser.add_argument("--data", default="arithmetic", help="arithmetic | gsm8k | a JSONL file, saved datasets "
                                                             "folder or hub data set (default arithmetic)")
    parser.add_argument("--mode", choices=("single", "stepwise"), default="single",
                        help="the env mode whose prompts and solution format the gold data takes (default single)")
    parser.add_argument("--level", type=int, default=3, help="Arithmetic-v0 level (default 3)")
    parser.add_argument("--train_examples", type=int, default=0,
                        help="arithmetic: train problems drawn (0: all; default 0)")
    parser.add_argument("--held_out_examples", type=int, default=256,
                        help="held-out examples scored for eval_loss (arithmetic, gsm8k; default 256)")
    parser.add_argument("--data_path", default=None, help="gsm8k: the train JSONL file or folder (None: the hub)")
    parser.add_argument("--test_data_path", default=None, help="gsm8k: a test file (else --holdout rows held back)")
    parser.add_argument("--holdout", type=int, default=500,
                        help="gsm8k: the last rows of the train data held back when there is no test file "
                             "(default 500)")
    parser.add_argument("--held_out_fraction", type=float, default=0.05,
                        help="a data file: the fraction held out, seeded (default 0.05)")
    parser.add_argument("--eval_episodes", type=int, default=0,
                        help="greedy accuracy on this many held-out env problems before and after (0: off)")
    parser.add_argument("--max_new_tokens", type=int, default=256, help="tokens per answer for --eval_episodes")
    parser.add_argument("--lora_r", type=int, default=0, help="train LoRA adapters of this rank (0: every weight)")
    parser.add_argument("--resume", action="store_true", help="continue from the newest complete checkpoint")
    add_config_arguments(parser, SFTConfig, presets=PRESETS)
    return parser


def main(argv: list[str] | None = None) -> None:
    run_with_clear_errors(lambda: run(build_parser().parse_args(argv)))


def build_data(args: argparse.Namespace, seed: int):
    """(train examples, held-out examples, the held-out env or None, a line saying what they are)."""
    held_n = args.held_out_examples
    if held_n < 1:
        raise ValueError(f"--held_out_examples must be >= 1, got {held_n}")
    if args.data == "arithmetic":
        if args.train_examples < 0:
            raise ValueError(f"--train_examples must be >= 0, got {args.train_examples}")
        train = arithmetic_sft_examples(args.level, "train", args.train_examples or None, seed, args.mode)
        held = arithmetic_sft_examples(args.level, "test", held_n, seed, args.mode)
        env = make("Arithmetic-v0", level=args.level, split="test", mode=args.mode)
        return train, held, env, f"Arithmetic-v0 level {args.level}: train split gold solutions, test split held out"
    if args.data == "gsm8k":
        _, env, train_rows, where = gsm8k_train_test(args.data_path, args.test_data_path, args.holdout,
                                                     mode=args.mode)
        train = gsm8k_sft_examples(args.data_path, train_rows, args.mode)
        if train_rows is None:
            held = gsm8k_sft_examples(args.test_data_path, (0, min(held_n, env.num_problems)), args.mode, "test")
        else:
            stop = train_rows[1] + env.num_problems
            held = gsm8k_sft_examples(args.data_path, (train_rows[1], min(stop, train_rows[1] + held_n)), args.mode)
        return train, held, env, "GSM8K: " + where
    examples = load_sft_examples(args.data)
    train, held = split_examples(examples, args.held_out_fraction, seed)
    return train, held, None, f"{args.data}: {len(held)} of {len(examples)} examples held out (seeded)"


def accuracy(policy, env, args: argparse.Namespace) -> str:
    result = evaluate(policy, env, episodes=args.eval_episodes, max_new_tokens=args.max_new_tokens)
    return f"{result['accuracy']:.1%}"


def run(args: argparse.Namespace) -> None:
    import torch

    preset = args.preset or ("gpu" if torch.cuda.is_available() else "cpu")
    config = config_from_arguments(SFTConfig, args, PRESETS[preset])
    if args.lora_r < 0:
        raise ValueError(f"--lora_r must be >= 0, got {args.lora_r}")
    train, held, env, what = build_data(args, config.seed)
    policy = HFPolicy(args.model, lora=LoraSettings(r=args.lora_r, alpha=2 * args.lora_r) if args.lora_r else None)
    print(f"device={policy.device} preset={preset} model={args.model}")
    print(f"{what}; {len(train)} training examples, {len(held)} held out")
    measure = args.eval_episodes > 0 and env is not None
    before = accuracy(policy, env, args) if measure else None
    trainer = SFT(policy, train, config, held_out=held)
    start = time.perf_counter()
    rows = trainer.train(resume=args.resume)
    minutes = (time.perf_counter() - start) / 60
    folder = trainer.save_model(Path(config.output_dir) / "model")
    losses = [f"{r['eval_loss']:.4f} (iteration {r['iteration']})" for r in rows if "eval_loss" in r]
    if losses:
        print("held-out loss per completion token: " + (f"{losses[0]} -> {losses[-1]}" if len(losses) > 1
                                                         else losses[0]))
    if measure:
        print(f"held-out greedy accuracy ({args.eval_episodes} problems): {before} -> {accuracy(policy, env, args)}")
    print(f"{config.train_iterations} iterations in {minutes:.1f} min including evaluation; model: {folder}; "
          f"run folder: {config.output_dir} (metrics.jsonl, metrics.png, checkpoint-N/)")


if __name__ == "__main__":
    main()
