"""The `lmgym` command: `lmgym grpo|ppo|reinforce|sft|dpo|eval|serve [flags]` (also `python -m lmgym ...`).

The top layer: each command puts a trainer, the evaluator or the server behind flags in TRL's names
(`--model`, `--dataset_name`, `--reward_funcs`, `--config file.yaml` and every config field). `main` is the entry
point setup.py installs (`dispatch` the same, returning the command's result); commands/main.py dispatches
to one module per command.
"""
from lmgym.commands.main import COMMANDS, dispatch, main

__all__ = ["COMMANDS", "dispatch", "main"]
