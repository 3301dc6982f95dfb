"""The Python code blocks of the README and the docs pages, and how the tests run them as a reader would.

A docs block is run when the line before its fence is `<!-- runnable -->` (an HTML comment: neither
GitHub nor MkDocs shows it); every Python block of the README is run. Blocks run verbatim, in a fresh
namespace, in an empty working folder, with `HFPolicy()` (the embedded model) loading the tiny model
built in code instead, so they take seconds on a CPU.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import gymnasium
import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RUNNABLE = "<!-- runnable -->"
FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block: its page, the line of its opening fence (1-based), language and code."""

    path: Path
    line: int
    language: str
    code: str
    runnable: bool

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def code_blocks(path: Path) -> list[Block]:
    """Every fenced block of a markdown file; an unclosed fence is an error naming its line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{path.relative_to(ROOT)}:{i + 1}: a code fence is never closed")
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        blocks.append(Block(path, i + 1, opening.group(1), "\n".join(lines[i + 1:end]) + "\n", before == RUNNABLE))
        i = end + 1
    return blocks


def python_blocks(path: Path, runnable_only: bool) -> list[Block]:
    return [b for b in code_blocks(path) if b.language == "python" and (b.runnable or not runnable_only)]


def docs_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def run_block(block: Block) -> dict:
    """Execute the block's code in a fresh namespace; returns the namespace (its variables)."""
    namespace = {"__name__": "__doc_block__"}
    exec(compile(block.code, block.name, "exec"), namespace)  # noqa: S102 - the project's own docs
    return namespace


@pytest.fixture
def reader(monkeypatch, tmp_path):
    """What a reader's machine gives a block: an empty working folder and `HFPolicy()` (here the tiny model).
    Envs the block registers are unregistered afterwards."""
    from lmgym.envs import registry
    from lmgym.policies import build_tiny_model, build_tiny_tokenizer, hf
    from lmgym.policies.loading.models import EMBEDDED_ALIASES

    real_load = hf.load_model_and_tokenizer

    def load(name_or_path, *args, **kwargs):
        if name_or_path in EMBEDDED_ALIASES:
            tokenizer = build_tiny_tokenizer()
            return build_tiny_model(tokenizer, seed=0), tokenizer
        return real_load(name_or_path, *args, **kwargs)

    monkeypatch.setattr(hf, "load_model_and_tokenizer", load)
    monkeypatch.chdir(tmp_path)
    registered, gym_ids = dict(registry._REGISTERED), set(gymnasium.registry)
    yield tmp_path
    for env_id in set(registry._REGISTERED) - set(registered):
        del registry._REGISTERED[env_id]
    for env_id in set(gymnasium.registry) - gym_ids:
        del gymnasium.registry[env_id]
