"""The flags the commands share, in TRL's names: the model (`--model`, TRL's `--model_name_or_path`; LoRA through
`--use_peft --lora_r 16`), the data set (`--dataset_name`, `--dataset_config`, the splits) and the reward
functions (`--reward_funcs`), and how each becomes a policy, a `datasets.Dataset` or functions."""
from __future__ import annotations

import argparse
from typing import Any

from lmgym.commands.data import load_data
from lmgym.commands.rewards import ABOUT, reward_functions
from lmgym.policies import EMBEDDED_MODEL


def add_model_arguments(parser: argparse.ArgumentParser, lora: bool = True) -> None:
    """--model (and TRL's --model_name_or_path), --system_prompt_path and, with `lora`, TRL's LoRA flags."""
    group = parser.add_argument_group("model")
    group.add_argument("--model", "--model_name_or_path", dest="model", default=EMBEDDED_MODEL,
                       help=f"hub name or local folder (default: the embedded {EMBEDDED_MODEL.partition(':')[2]})")
    group.add_argument("--system_prompt_path", default=None,
                       help="a text file whose contents are the system prompt (default: the model folder's own, "
                            "else none)")
    if lora:
        group.add_argument("--use_peft", action="store_true", help="train LoRA adapters instead of every weight")
        group.add_argument("--lora_r", type=int, default=16, help="LoRA rank (with --use_peft; default 16)")
        group.add_argument("--lora_alpha", type=int, default=32, help="LoRA alpha (with --use_peft; default 32)")
        group.add_argument("--lora_dropout", type=float, default=0.0, help="LoRA dropout (with --use_peft; default 0)")


def add_dataset_arguments(parser: argparse.ArgumentParser, what: str, test_split: bool = True) -> None:
    """--dataset_name (required), --dataset_config, --dataset_train_split and, with `test_split`,
    --dataset_test_split; `what` says which columns the rows need."""
    group = parser.add_argument_group("data set")
    group.add_argument("--dataset_name", required=True,
                       help=f"a hub data set, or a local .jsonl/.json/.csv/.parquet file or saved folder; {what}")
    group.add_argument("--dataset_config", default=None, help="the hub data set's configuration (subset) name")
    group.add_argument("--dataset_train_split", default="train", help="the split trained on (default train)")
    if test_split:
        group.add_argument("--dataset_test_split", default=None,
                           help="a split evaluated on during training (default: none)")


def add_reward_arguments(parser: argparse.ArgumentParser) -> None:
    """--reward_funcs: one or more names (required)."""
    group = parser.add_argument_group("rewards")
    group.add_argument("--reward_funcs", nargs="+", required=True, metavar="NAME",
                       help=f"reward functions, several allowed ({ABOUT.replace('%', '%%')})")


def build_policy(args: argparse.Namespace, lora: bool = True):
    """The HFPolicy of --model, with the system prompt file and LoRA flags when given."""
    from lmgym.policies import HFPolicy, LoraSettings
    from lmgym.policies.few_shot import read_system_prompt

    system_prompt = read_system_prompt(args.system_prompt_path) if args.system_prompt_path else None
    settings = None
    if lora and args.use_peft:
        settings = LoraSettings(r=args.lora_r, alpha=args.lora_alpha, dropout=args.lora_dropout)
    return HFPolicy(args.model, system_prompt=system_prompt, lora=settings)


def datasets_of(args: argparse.Namespace) -> tuple[Any, Any]:
    """(train split, test split or None) of --dataset_name."""
    train = load_data(args.dataset_name, args.dataset_config, args.dataset_train_split)
    test_split = getattr(args, "dataset_test_split", None)
    test = load_data(args.dataset_name, args.dataset_config, test_split) if test_split else None
    return train, test


def rewards_of(args: argparse.Namespace) -> list:
    """The functions of --reward_funcs."""
    return reward_functions(args.reward_funcs)
