"""`lmgym <command> ...`: the installed command (setup.py's console script) and `python -m lmgym`.

Each command's flags and work live in its own module (`COMMANDS`), loaded only when it runs, so `lmgym --help`
and a mistyped command answer at once. An unknown command is one line naming the closest ones, exit status 2.
"""
from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from lmgym.core.messages import did_you_mean

# command -> (module in lmgym.commands, what it does)
COMMANDS = {
    "grpo": ("rl", "train with GRPO on a data set's prompts, scored by reward functions (as trl grpo)"),
    "ppo": ("rl", "train with PPO (a value head) on a data set's prompts, scored by reward functions"),
    "reinforce": ("rl", "train with REINFORCE (stable variant) on a data set's prompts, scored by reward functions"),
    "sft": ("supervised", "supervised fine-tuning on {prompt, completion} or {messages} rows (as trl sft)"),
    "dpo": ("supervised", "DPO on {prompt, chosen, rejected} rows (as trl dpo)"),
    "eval": ("evaluate", "a model's accuracy (pass@k, maj@k) on an env or a data set"),
    "serve": ("serve", "serve a model over HTTP: OpenAI-compatible /v1 routes, /generate, /solve"),
}
USAGE = "usage: lmgym <command> [flags]   (lmgym <command> --help lists a command's flags)"


def help_text() -> str:
    """What `lmgym --help` prints: the usage, then each command and what it does."""
    from lmgym import __version__

    width = max(map(len, COMMANDS))
    rows = "\n".join(f"  {name:<{width}}  {about}" for name, (_, about) in COMMANDS.items())
    return (f"{USAGE}\n\nlmgym {__version__}: train language models with reinforcement learning.\n\n"
            f"commands:\n{rows}\n\n"
            f"examples:\n  lmgym grpo --model <hub name or folder> --dataset_name data.jsonl --reward_funcs "
            f"my_rewards.correct --max_steps 100\n  lmgym eval --model runs/grpo/model --env GSM8K-v0\n")


def fail(message: str) -> NoReturn:
    """Exit with status 2 (argparse's, for usage errors) after one line."""
    print(f"lmgym: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: run `lmgym <command> [flags]` (`argv` without the program name; None: sys.argv[1:]) and
    return exit status 0; bad input exits (SystemExit) with one line and a non-zero status."""
    dispatch(argv)
    return 0


def dispatch(argv: Sequence[str] | None = None) -> Any:
    """Run `lmgym <command> [flags]`; the command's result (a trainer's metrics rows, eval's metrics). `--help` or
    no command prints the commands (no command: then exits 2); `--version` prints the version."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(help_text(), end="")
        return None if args else fail("no command given; choose one of " + ", ".join(COMMANDS))
    if args[0] == "--version":
        from lmgym import __version__

        print(f"lmgym {__version__}")
        return None
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        what = "flag" if command.startswith("-") else "command"
        fail(f"unknown {what} {command!r}{did_you_mean(command, COMMANDS)}; choose a command from "
             f"{', '.join(COMMANDS)} (lmgym --help)")
    module = importlib.import_module(f"lmgym.commands.{COMMANDS[command][0]}")
    return module.main(rest, command=command)
