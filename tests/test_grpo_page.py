"""docs/algorithms.md's "GRPO on one page" names each call with its `path:line`: every such place must still be
the definition of the name written before it (a moved or renamed function fails here, not silently in the docs)."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLACE = re.compile(r"`(lmgym/[\w/]+\.py):(\d+)`")
NAME = re.compile(r"`([A-Za-z_][\w.]*)`[^`]*$")


def places(page: str):
    """(name, path, line) for each `path:line` of the page, the name being the last `code` name before it."""
    for match in PLACE.finditer(page):
        before = NAME.search(page[max(0, match.start() - 200):match.start()])
        yield before.group(1).split(".")[-1], match.group(1), int(match.group(2))


def test_every_file_line_of_the_grpo_page_is_the_definition_it_names():
    page = (ROOT / "docs" / "algorithms.md").read_text(encoding="utf-8")
    found = list(places(page))
    assert len(found) >= 30
    wrong = []
    for name, path, line in found:
        lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
        text = lines[line - 1].strip() if line <= len(lines) else ""
        if not re.match(rf"(async )?(def|class) {re.escape(name)}\b", text):
            wrong.append(f"{path}:{line} is not `{name}` ({text!r})")
    assert not wrong, "docs/algorithms.md: " + "; ".join(wrong)
