"""`lmgym sft` and `lmgym dpo`: supervised fine-tuning and DPO on a data set in TRL's field names.

    lmgym sft --model Qwen/Qwen2.5-0.5B-Instruct --dataset_name sft.jsonl --max_steps 200 --output_dir runs/sft
    lmgym dpo --model runs/sft/model --dataset_name pairs.jsonl --beta 0.1 --output_dir runs/dpo

SFT rows: {"prompt", "completion"} (text, or both message lists: trained on the completion's turns) or
{"messages"} (trained on the assistant turns), as TRL's SFTTrainer takes them (traindata/sft_data.py). DPO rows:
{"prompt", "chosen", "rejected"} as text (traindata/preference_data.py); conversational or prompt-less pairs are
refused in one line. --dataset_test_split names a held-out split scored as eval_loss. Every config field is a
flag (TRL's names too); --config file.yaml sets fields, and flags override it. The run folder (--output_dir) gets
metrics.jsonl, metrics.png, checkpoint-N/ and the trained model in model/.
"""
from __future__ import annotations

import argparse
from typing import Any

from lmgym.commands.arguments import add_dataset_arguments, add_model_arguments, build_policy, datasets_of
from lmgym.training.cli import add_config_arguments, config_from_arguments, run_with_clear_errors, train_and_report
from lmgym.training.flag_parser import SuggestingParser

ROWS = {"sft": "rows {prompt, completion} or {messages}", "dpo": "rows {prompt, chosen, rejected} as text"}


def classes(command: str) -> tuple[type, type]:
    """(trainer class, config class) of `command`."""
    from lmgym.algorithms import DPO, SFT, DPOConfig, SFTConfig

    return {"sft": (SFT, SFTConfig), "dpo": (DPO, DPOConfig)}[command]


def examples_of(command: str, dataset: Any, label: str) -> list:
    """The data set's rows as `command`'s trainer takes them: SFT examples or preference pairs; a bad row is one
    ValueError naming `label` and the row. A column a row lacks (None where `datasets` joined rows of two forms,
    {prompt, completion} beside {messages}) is left out of that row."""
    from lmgym.traindata.preference_data import load_preference_pairs
    from lmgym.traindata.sft_data import load_sft_examples

    rows = [{key: value for key, value in row.items() if value is not None} for row in dataset]
    try:
        return load_sft_examples(rows) if command == "sft" else load_preference_pairs(rows)
    except ValueError as err:
        raise ValueError(f"--dataset_name {label}: {str(err).removeprefix('list').strip()}") from None


def build_parser(command: str = "sft") -> argparse.ArgumentParser:
    """The flags of `lmgym <command>`: model, data set and every config field."""
    _, config_class = classes(command)
    parser = SuggestingParser(prog=f"lmgym {command}", description=__doc__,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(parser)
    add_dataset_arguments(parser, ROWS[command])
    add_config_arguments(parser, config_class, {"output_dir": f"runs/{command}"})
    return parser


def run(command: str, args: argparse.Namespace) -> list[dict]:
    """Train `command` as `args` say; the run's metrics rows."""
    trainer_class, config_class = classes(command)
    config = config_from_arguments(config_class, args, {"output_dir": f"runs/{command}"})
    train, test = datasets_of(args)
    train_rows = examples_of(command, train, f"{args.dataset_name} ({args.dataset_train_split})")
    held_out = () if test is None else examples_of(command, test, f"{args.dataset_name} ({args.dataset_test_split})")
    policy = build_policy(args)
    trainer = trainer_class(policy, train_rows, config, held_out=held_out)
    print(f"{trainer_class.__name__}: model={args.model} device={policy.device} data={args.dataset_name} "
          f"({len(train_rows)} rows{f', {len(held_out)} held out' if held_out else ''})")
    return train_and_report(trainer)


def main(argv: list[str] | None = None, command: str = "sft") -> list[dict]:
    """`lmgym sft ...` or `lmgym dpo ...`; bad input exits with one line."""
    from lmgym.training.distributed import init_from_env

    init_from_env()
    return run_with_clear_errors(lambda: run(command, build_parser(command).parse_args(argv)))
