"""The library's packages, their files and lines, bottom layer first (the layers are .importlinter's).

`python scripts/package_table.py` prints a Markdown table; tests/test_package_sizes.py checks that no
package holds more than MAX_SHARE of the library's lines, so no package grows back into a catch-all.
"""
from __future__ import annotations

import configparser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_SHARE = 0.30


def layers() -> list[str]:
    """The library packages, top layer first, as .importlinter's layers contract lists them."""
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    return config["importlinter:contract:layers"]["layers"].split()


def package_sizes() -> dict[str, tuple[int, int]]:
    """Package -> (Python files, lines), bottom layer first."""
    sizes = {}
    for package in reversed(layers()):
        files = sorted((ROOT / "lmgym" / package).rglob("*.py"))
        sizes[package] = (len(files), sum(len(f.read_text().splitlines()) for f in files))
    return sizes


def markdown_table(sizes: dict[str, tuple[int, int]]) -> str:
    """| package | files | lines | share |, one row a package and a total row."""
    total = sum(lines for _, lines in sizes.values())
    rows = ["| package (bottom layer first) | files | lines | share |", "|---|---:|---:|---:|"]
    rows += [f"| `{p}/` | {files} | {lines} | {100 * lines / total:.1f}% |" for p, (files, lines) in sizes.items()]
    rows.append(f"| total | {sum(f for f, _ in sizes.values())} | {total} | 100% |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table(package_sizes()))
