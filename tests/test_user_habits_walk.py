"""benchmarks/user_habits_walk.py (issues 27 and 40; a benchmark, not a test itself): its list of expectations,
each named once, and its harness's isolation: the checks run in a user's folder with a fresh venv's python,
where `lmgym` is the built wheel's (never this checkout's) and `envs`/`training` are the user's own packages."""
import importlib.util
import json
import sys
from pathlib import Path

from tests.tiers import slow

pytestmark = slow  # the slow tier (tests/tiers.py): runs a user's walk as processes

ROOT = Path(__file__).resolve().parents[1]


def load_walk():
    spec = importlib.util.spec_from_file_location("user_habits_walk", ROOT / "benchmarks" / "user_habits_walk.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_walk_lists_52_uniquely_named_expectations():
    walk = load_walk()
    names = [e.name for e in walk.EXPECTATIONS]
    assert len(names) == 52 and len(set(names)) == 52
    assert all(e.area and e.expects and "\n" not in e.expects and callable(e.check) and e.group
               for e in walk.EXPECTATIONS)
    groups = walk.groups_of(walk.EXPECTATIONS)
    assert sum(len(group) for group in groups) == 52
    assert len({item.group for group in groups for item in group}) == len(groups)  # each group runs once


def test_the_table_counts_each_status():
    walk = load_walk()
    rows = [{"area": "cli", "expects": "x", "status": s, "reason": "r"} for s in ("works", "works", "partly", "fails")]
    assert walk.counts(rows) == {"works": 2, "partly": 1, "fails": 1}
    assert walk.table(rows).splitlines()[2] == "| 1 | cli | x | works | r |"


PROBE = """
import json, sys
import envs, training
import lmgym
import walkkit
print(json.dumps({"lmgym": lmgym.__file__, "envs": envs.__file__, "training": training.__file__,
                  "user_envs": getattr(envs, "USER_ENVS", False), "walk_user": str(walkkit.USER),
                  "prefix": sys.prefix}))
"""


def test_the_checks_run_in_the_users_folder_against_the_wheel_in_a_fresh_venv(tmp_path):
    import subprocess

    walk = load_walk()
    machine = walk.user_machine(tmp_path)
    (machine.user / "probe.py").write_text(PROBE, encoding="utf-8")
    done = subprocess.run([str(machine.python), "probe.py"], cwd=machine.user, env=machine.env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert Path(seen["lmgym"]).resolve().is_relative_to(machine.venv), seen["lmgym"]
    assert not Path(seen["lmgym"]).resolve().is_relative_to(ROOT)
    assert Path(seen["prefix"]).resolve() == machine.venv
    assert Path(seen["envs"]).resolve() == machine.user / "envs" / "__init__.py" and seen["user_envs"] is True
    assert Path(seen["training"]).resolve() == machine.user / "training" / "__init__.py"
    assert Path(seen["walk_user"]) == machine.user
    assert "PYTHONPATH" not in machine.env()

    # the harness's own path: a group of two checks in one process, one verdict each, read back by name
    chosen = [e for e in walk.EXPECTATIONS if e.name in ("wheel_install", "wheel_top_level_names")]
    verdicts = walk.run_group(machine, chosen, timeout=300)
    assert verdicts["wheel_install"]["status"] == "works", verdicts["wheel_install"]
    assert machine.wheel.name in verdicts["wheel_install"]["reason"]
    assert verdicts["wheel_top_level_names"]["status"] in ("works", "partly")
