"""benchmarks/user_habits_walk.py (issue 27's walk, not a test itself): its list is the 38 expectations, each
named once, with an area and a one-line statement of what the user expects."""
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_walk():
    spec = importlib.util.spec_from_file_location("user_habits_walk", ROOT / "benchmarks" / "user_habits_walk.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_walk_lists_38_uniquely_named_expectations():
    walk = load_walk()
    names = [e.name for e in walk.EXPECTATIONS]
    assert len(names) == 38 and len(set(names)) == 38
    assert all(e.area and e.expects and "\n" not in e.expects and callable(e.check) for e in walk.EXPECTATIONS)


def test_the_table_counts_each_status():
    walk = load_walk()
    rows = [{"area": "cli", "expects": "x", "status": s, "reason": "r"} for s in ("works", "works", "partly", "fails")]
    assert walk.counts(rows) == {"works": 2, "partly": 1, "fails": 1}
    assert walk.table(rows).splitlines()[2] == "| 1 | cli | x | works | r |"
