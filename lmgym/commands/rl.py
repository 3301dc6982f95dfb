"""`lmgym grpo`, `lmgym ppo` and `lmgym reinforce`: train on a data set's prompts, scored by reward functions, as
`trl grpo` does.

    lmgym grpo --model Qwen/Qwen2.5-0.5B-Instruct --dataset_name data.jsonl --reward_funcs my_rewards.correct \\
        --num_generations 8 --max_steps 100 --output_dir runs/grpo --log_completions

Each row of --dataset_name needs a "prompt" (text, or a list of chat messages); its other columns reach the
reward functions as keywords (TRL's form) or in info["fields"] (the per-sample form), and its "answer" column,
when it has one, is the gold that train_accuracy counts. The data set becomes a Dataset-v0 env
(algorithms/env_input.py). Every config field is a flag (TRL's names too: --num_generations, --beta,
--per_device_train_batch_size, --max_steps ...); --config file.yaml sets fields, and flags override it. The run
folder (--output_dir) gets metrics.jsonl, metrics.png, config.json, checkpoint-N/, completions.jsonl (with
--log_completions) and the trained model in model/. Set RLGYM_TRACEBACK=1 to see tracebacks instead of one-line
errors.
"""
from __future__ import annotations

import argparse
from typing import Any

from lmgym.algorithms.env_input import trainer_envs
from lmgym.commands.arguments import (
    add_dataset_arguments,
    add_model_arguments,
    add_reward_arguments,
    build_policy,
    datasets_of,
    rewards_of,
)
from lmgym.training.cli import add_config_arguments, config_from_arguments, run_with_clear_errors, train_and_report
from lmgym.training.flag_parser import SuggestingParser

# command -> (trainer, its config), both in lmgym.algorithms
ALGORITHMS = {"grpo": ("GRPO", "GRPOConfig"), "ppo": ("PPO", "PPOConfig"),
              "reinforce": ("ReinforceStable", "ReinforceStableConfig")}
ROWS = ("each row needs a 'prompt' column (text or chat messages); the others reach the reward functions as "
        "keywords, and 'answer' is the gold train_accuracy counts")


def classes(command: str) -> tuple[type, type]:
    """(trainer class, config class) of `command`."""
    import lmgym.algorithms as algorithms

    trainer, config = ALGORITHMS[command]
    return getattr(algorithms, trainer), getattr(algorithms, config)


def defaults(command: str) -> dict[str, Any]:
    """The config values the command starts from (a --config file and flags override them)."""
    return {"output_dir": f"runs/{command}"}


def build_parser(command: str = "grpo") -> argparse.ArgumentParser:
    """The flags of `lmgym <command>`: model, data set, reward functions and every config field."""
    _, config_class = classes(command)
    about = __doc__.replace("lmgym grpo --", f"lmgym {command} --")
    parser = SuggestingParser(prog=f"lmgym {command}", description=about,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser)
    add_dataset_arguments(parser, ROWS)
    add_reward_arguments(parser)
    add_config_arguments(parser, config_class, defaults(command))
    return parser


def run(command: str, args: argparse.Namespace) -> list[dict]:
    """Train `command`'s algorithm as `args` say; the run's metrics rows. Cheap checks first: the config, the
    reward functions and the data, then the model."""
    trainer_class, config_class = classes(command)
    config = config_from_arguments(config_class, args, defaults(command))
    reward_funcs = rewards_of(args)
    train, test = datasets_of(args)
    # the envs the trainer will wrap the data in, built once before the model loads: the 'prompt' column, the reward
    # functions' forms and reward_weights are checked here (one line each), not after minutes of loading
    trainer_envs(trainer_class.__name__, None, None, train, test, reward_funcs, config.reward_weights)
    policy = build_policy(args)
    trainer = trainer_class(policy, config=config, train_dataset=train, eval_dataset=test, reward_funcs=reward_funcs)
    print(f"{trainer_class.__name__}: model={args.model} device={policy.device} data={args.dataset_name} "
          f"({len(train)} rows{f', {len(test)} evaluated' if test is not None else ''}) "
          f"rewards={', '.join(args.reward_funcs)}")
    return train_and_report(trainer)


def main(argv: list[str] | None = None, command: str = "grpo") -> list[dict]:
    """`lmgym <command> ...` (grpo, ppo or reinforce); bad input exits with one line."""
    from lmgym.training.distributed import init_from_env

    init_from_env()  # a torchrun launch joins its process group here (rank 0 alone prints and writes)
    return run_with_clear_errors(lambda: run(command, build_parser(command).parse_args(argv)))
