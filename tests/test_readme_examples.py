"""The README is a front door: short, its Python runs as shown, and its links and anchors resolve."""
import json
import re

import pytest

from tests.doc_blocks import ROOT, python_blocks, reader, run_block  # noqa: F401  (reader: a fixture)
from tests.tiers import slow

README = ROOT / "README.md"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    return {github_slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def test_the_readme_is_at_most_250_lines():
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_every_readme_link_and_anchor_resolves():
    links = [link for link in LINK.findall(README.read_text(encoding="utf-8")) if "://" not in link]
    assert len(links) > 20
    for link in links:
        target, _, anchor = link.partition("#")
        path = ROOT / target
        assert path.exists(), link
        if anchor:
            assert anchor in anchors(path), link


def test_github_slugs_match_githubs_rule():
    assert github_slug("SFT against TRL's SFTTrainer (issue: SFT, DPO, reflection), one H100, 2026-11-26") == \
        "sft-against-trls-sfttrainer-issue-sft-dpo-reflection-one-h100-2026-11-26"
    assert github_slug("Register your own in three lines") == "register-your-own-in-three-lines"


@slow
@pytest.mark.plots  # reads the run's PNGs (tests/conftest.py)
def test_the_readme_pieces_train_and_evaluate_as_shown(reader):  # noqa: F811  (the fixture)
    blocks = python_blocks(README, runnable_only=False)
    assert len(blocks) == 1 and "GRPO(policy, env, config, eval_env=test_env).train()" in blocks[0].code
    namespace = run_block(blocks[0])
    rows = [json.loads(line) for line in (reader / "runs" / "demo" / "metrics.jsonl").read_text().splitlines()]
    assert [row["iteration"] for row in rows] == [0, 1, 2, 3, 4]  # 0: the evaluation before training
    assert (reader / "runs" / "demo" / "metrics.png").is_file()
    assert list((reader / "runs" / "demo").glob("checkpoint-*/MANIFEST.json"))
    assert 0.0 <= namespace["evaluate"](namespace["policy"], namespace["test_env"], episodes=4)["accuracy"] <= 1.0


@pytest.mark.parametrize("name", ["GRPO", "GRPOConfig", "make"])
def test_the_imports_the_moved_note_names_work(name):
    note = README.read_text(encoding="utf-8").split("## Moved in 0.3.0")[1]
    statement = re.search(rf"`(from [\w.]+ import [\w, ]*\b{name}\b[\w, ]*)`", note).group(1)
    exec(statement, {})  # noqa: S102
