"""Quickstart: GRPO teaches the embedded SmolLM2-135M-Instruct two-digit addition, offline.

    python examples/quickstart.py                 # CPU-sized run (2 cores: about 10-15 minutes)
    python examples/quickstart.py --preset gpu    # the GPU run: 16 prompts x 8 samples, 120 iterations

    python examples/quickstart.py --stepwise --prm runs/prm/model --prm_weight 0.5   # PRM-dense GRPO

`--prm` adds a process reward model's step scores (a folder from examples/train_prm.py, trained from this
model: it must share its tokenizer) to the reward, weighted by `--prm_weight` (`--outcome_weight` weighs
the env's own reward; 0 trains on the PRM alone); `--stepwise` plays each problem one line per step, the
steps the PRM scores. It prints held-out greedy accuracy (problems never trained on) before and after training (the
"before" evaluation is the run's iteration 0, logged and plotted like the others) and the run
folder: metrics, plot, checkpoints and the trained model in model/ (a Hugging Face folder).
Every GRPOConfig field is also a flag (`--learning_rate 3e-5`, ...), and so are TRL's names for them
(`--num_generations 8`, `--beta 0.04`); `--help` shows each preset's values.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from common import example_parser  # noqa: E402

from lmgym.algorithms import GRPO, GRPOConfig  # noqa: E402
from lmgym.envs import make  # noqa: E402
from lmgym.policies import EMBEDDED_MODEL, HFPolicy  # noqa: E402
from lmgym.policies.prm import ProcessRewardModel  # noqa: E402
from lmgym.training import ConfigError  # noqa: E402
from lmgym.training.cli import (  # noqa: E402
    add_config_arguments,
    config_from_arguments,
    run_with_clear_errors,
    train_and_report,
)
from lmgym.training.distributed import init_from_env  # noqa: E402

PRESETS = {
    # sized for 2 CPU cores: short answers, small groups, a large step size
    "cpu": dict(train_iterations=16, prompts_per_iteration=8, samples_per_prompt=6, max_new_tokens=40,
                learning_rate=5e-5, kl_coeff=0.04, eval_episodes=256, micro_batch_size=16, eval_at_start=True,
                output_dir="runs/quickstart-cpu"),
    # the GPU run of the closing note (TRL's GRPOTrainer bar: same prompts, 16 x 8, 64 tokens, beta 0.04)
    "gpu": dict(train_iterations=120, prompts_per_iteration=16, samples_per_prompt=8, max_new_tokens=64,
                learning_rate=5e-5, kl_coeff=0.04, eval_episodes=256, micro_batch_size=128, eval_at_start=True,
                output_dir="runs/quickstart-gpu"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = example_parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", choices=sorted(PRESETS), default=None,
                        help="cpu or gpu (default: gpu when CUDA is available)")
    parser.add_argument("--model", default=EMBEDDED_MODEL, help="hub name, local path, or the embedded default")
    parser.add_argument("--level", type=int, default=1, help="Arithmetic-v0 difficulty level (1: two-digit sums)")
    parser.add_argument("--stepwise", action="store_true",
                        help="one line per step (Arithmetic-v0's stepwise mode): the steps a PRM scores")
    parser.add_argument("--prm", default=None, help="a PRM folder (examples/train_prm.py) whose step scores join "
                                                    "the reward, weighted by --prm_weight (> 0)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest complete checkpoint in <output_dir>/checkpoints")
    add_config_arguments(parser, GRPOConfig, presets=PRESETS)  # --help shows each preset's values
    return parser


def main(argv: list[str] | None = None) -> None:
    init_from_env()  # a torchrun launch joins its process group here (rank 0 alone prints and writes)
    run_with_clear_errors(lambda: run(build_parser().parse_args(argv)))


def run(args: argparse.Namespace) -> None:
    import torch

    preset = args.preset or ("gpu" if torch.cuda.is_available() else "cpu")
    config = config_from_arguments(GRPOConfig, args, PRESETS[preset])  # checks wandb is importable, if asked for
    if args.prm is not None and config.prm_weight == 0:
        raise ConfigError("--prm is given but --prm_weight is 0: the PRM would score nothing; set --prm_weight > 0")
    policy = HFPolicy(args.model)
    prm = ProcessRewardModel.from_pretrained(args.prm, device=policy.device) if args.prm is not None else None
    mode = {"mode": "stepwise"} if args.stepwise else {}
    train_env = make("Arithmetic-v0", level=args.level, split="train", **mode)
    test_env = make("Arithmetic-v0", level=args.level, split="test", **mode)

    print(f"device={policy.device} preset={preset} model={args.model}" + (f" prm={args.prm}" if prm else ""))
    algo = GRPO(policy, train_env, config, eval_env=test_env, prm=prm)
    start = time.perf_counter()
    train_and_report(algo, args.resume)  # prints held-out accuracy, iteration 0 (before) -> the last
    minutes = (time.perf_counter() - start) / 60
    print(f"{config.train_iterations} iterations in {minutes:.1f} min including evaluation; "
          f"plot: {Path(config.output_dir) / 'metrics.png'}")


if __name__ == "__main__":
    main()
