"""The style rules of pyproject.toml's [tool.ruff] (pyflakes, pycodestyle, isort, pyupgrade, bugbear; lines of
120) hold over the whole tree, as `.ci/run` checks before the tests."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed (the [test] extra: pip install -e '.[test]')")
def test_ruff_passes_on_the_whole_tree():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
