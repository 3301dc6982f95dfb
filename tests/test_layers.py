"""The package layers hold: import-linter's `lint-imports` checks the contracts of .importlinter (each library
package imports only those below it; no import circles inside a package).

Expected to fail on a branch without the config task (issue 22's one checked-config base), which removes the
last circle, lmgym.training.trl_names <-> lmgym.training.config; it passes once that task is merged."""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def test_every_import_contract_is_kept():
    result = subprocess.run([sys.executable, "-c", LINT, "--config", str(ROOT / ".importlinter"), "--no-cache"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert re.search(r"Contracts: [1-9]\d* kept, 0 broken\.", result.stdout), result.stdout[-3000:]
