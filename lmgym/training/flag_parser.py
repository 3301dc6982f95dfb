"""An argument parser without prefix matching whose errors are one line saying what was meant (the examples' and
benchmarks' parser: examples/common.py's `example_parser`).

argparse takes any unambiguous prefix of a flag (`--learn` silently sets `--learning_rate`, `--lr` reaches
`--lr_scheduler_type`), and answers an unknown flag with the whole usage (60 lines for a trainer's flags)
and no suggestion. `allow_abbrev=False` turns the first off. Python 3.11's argparse has nothing for the second,
and 3.14's `suggest_on_error` covers mistyped choices and subcommand names only, not flags; so an unknown
flag here is one line naming it and the close known flags (lmgym.core.messages: prefixes, initials, difflib),
or, for a TRL name, what this toolkit calls it (training/trl_names.py). Exit status 2, as argparse's.
"""
from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NoReturn

from lmgym.core.messages import did_you_mean
from lmgym.training import trl_names


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class SuggestingParser(argparse.ArgumentParser):
    """An ArgumentParser without abbreviations whose errors are one line (no usage; `--help` shows it), an
    unknown flag's naming the flags it most likely meant."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> argparse.Namespace:
        namespace, extras = self.parse_known_args(args, namespace)
        if extras:
            self.error(self.unknown_arguments_line(extras))
        return namespace

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())}\n")

    def known_flags(self) -> list[str]:
        """Every option string `--help` shows (hidden flags are not suggested)."""
        return [flag for action in self._actions if action.help is not argparse.SUPPRESS
                for flag in action.option_strings]

    def unknown_arguments_line(self, extras: Sequence[str]) -> str:
        """The error for what no argument took: each unknown flag with what it most likely meant (a value after
        an unknown flag is not named); argparse's own line when no flag is among them."""
        flags = [text.split("=", 1)[0] for text in extras
                 if len(text) > 1 and text[0] in self.prefix_chars and not _is_number(text)]
        if not flags:
            return f"unrecognized arguments: {' '.join(extras)}"
        return "; ".join(self.unknown_flag_text(flag) for flag in dict.fromkeys(flags))

    def unknown_flag_text(self, flag: str) -> str:
        """"unknown flag --learning_rat (did you mean --learning_rate?)", or what a TRL name is called here."""
        name = flag.lstrip(self.prefix_chars)
        known = self.known_flags()
        if name in trl_names.DIFFERENT or name in trl_names.REMOVED:
            return f"{flag} {trl_names.DIFFERENT.get(name) or trl_names.REMOVED[name]}"
        alias = trl_names.SAME.get(name)
        if alias is not None:
            ours = f"--{alias.ours}"
            return (f"unknown flag {flag}: it is TRL's name for {ours}" +
                    (f"; write {ours}" if ours in known else f", which {self.prog} does not take"))
        by_name = {f.lstrip(self.prefix_chars): f for f in known}
        return f"unknown flag {flag}" + did_you_mean(name, by_name, quote=by_name.__getitem__)
