"""The docs' TRL-names and config-reference tables (docs/config-reference.md), generated from the config
dataclasses and training/trl_names.py so they cannot drift (tests/test_config_help.py checks the page matches).

    python scripts/config_reference.py            # rewrite the tables in docs/config-reference.md
    python scripts/config_reference.py --check    # exit 1 if docs/config-reference.md is out of date
"""
from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "docs" / "config-reference.md"
sys.path.insert(0, str(ROOT))

from lmgym.algorithms import (  # noqa: E402
    DAPOConfig,
    DPOConfig,
    DrGRPOConfig,
    GRPOConfig,
    MCTSSearchConfig,
    PPOConfig,
    PRMConfig,
    ReinforceStableConfig,
    RLConfig,
    RLOOConfig,
    SFTConfig,
)
from lmgym.core.dotted_names import settings_of  # noqa: E402
from lmgym.training import TrainerConfig, trl_names  # noqa: E402

CONFIGS = (TrainerConfig, RLConfig, GRPOConfig, DrGRPOConfig, DAPOConfig, RLOOConfig, PPOConfig, ReinforceStableConfig,
           MCTSSearchConfig, PRMConfig, SFTConfig, DPOConfig)
MARKERS = {"trl": ("<!-- trl-table:start -->", "<!-- trl-table:end -->"),
           "reference": ("<!-- config-reference:start -->", "<!-- config-reference:end -->")}


def type_name(kind: typing.Any) -> str:
    """`int`, `tuple[float, float]`, ..."""
    return kind.__name__ if isinstance(kind, type) and not typing.get_args(kind) else str(kind).replace("typing.", "")


def cell(text: str) -> str:
    return text.replace("|", "\\|")


def trl_table() -> str:
    """Markdown: TRL's name -> ours, and whether the meaning is the same."""
    rows = ["| TRL (`GRPOConfig` / `TrainingArguments`) | here | meaning |", "| --- | --- | --- |"]
    for name, alias in trl_names.SAME.items():
        rows.append(f"| `{name}` | `{alias.ours}` | same{cell(': ' + alias.note) if alias.note else ''} |")
    for name, note in trl_names.SAME_NAME.items():
        rows.append(f"| `{name}` | `{name}` | same{cell(': ' + note) if note else ''} |")
    for name, why in trl_names.DIFFERENT.items():
        nearest = " / ".join(f"`{n}`" for n in trl_names.NEAREST.get(name, "").split(" / ") if n) or "none"
        rows.append(f"| `{name}` | refused; nearest: {nearest} | different: {cell(why)} |")
    return "\n".join(rows)


def config_tables() -> str:
    """Markdown: every TrainerConfig setting, then what RLConfig and each algorithm's config add or set
    differently (a nested config's fields dotted)."""
    parts = []
    for cls in CONFIGS:
        base = next((b for b in cls.__mro__[1:] if dataclasses.is_dataclass(b)), None)
        base_defaults = {s.name: s.default for s in settings_of(base).values()} if base else {}
        rows = []
        for s in settings_of(cls).values():
            if s.name in base_defaults and base_defaults[s.name] == s.default:
                continue
            rows.append(f"| `{s.name}` | {cell(type_name(s.kind))} | `{s.default!r}` | {cell(s.help)} |")
        article = "an" if base and base.__name__[0] in "AEIOUR" else "a"
        heading = f"**{cls.__name__}**" + (
            f" ({article} {base.__name__}; fields it adds or sets differently)" if base else "")
        parts.append("\n".join([heading, "", "| field | type | default | what |", "| --- | --- | --- | --- |", *rows]))
    return "\n\n".join(parts)


def render(page: str) -> str:
    """`page` with the text between each pair of markers replaced by the generated table."""
    for key, table in (("trl", trl_table()), ("reference", config_tables())):
        start, end = MARKERS[key]
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
        if not pattern.search(page):
            raise SystemExit(f"{TARGET.relative_to(ROOT)} lacks the markers {start} ... {end}")
        page = pattern.sub(lambda _, text=f"{start}\n{table}\n{end}": text, page)
    return page


def main(argv: list[str] | None = None) -> int:
    """Rewrite the page's tables, or with --check only say whether it is up to date (--help: this, nothing
    written; an unknown flag: argparse's usage error, nothing written)."""
    parser = argparse.ArgumentParser(
        prog="scripts/config_reference.py",
        description=f"Generate the TRL-names and config-reference tables of {TARGET.relative_to(ROOT)} from the "
                    f"config dataclasses and lmgym/training/trl_names.py. Without flags the page is rewritten.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the page is out of date")
    args = parser.parse_args(argv)
    current = TARGET.read_text(encoding="utf-8")
    wanted = render(current)
    if args.check:
        if wanted != current:
            print(f"{TARGET.relative_to(ROOT)} is out of date: python scripts/config_reference.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
