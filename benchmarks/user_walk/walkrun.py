"""Run some of the walk's checks in this process: `python walkrun.py NAME...` in the user's folder, with the
venv's python. Prints one `WALK-VERDICT {json}` line per check (the harness reads them); an exception in a
check is `fails` with its first line."""
from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import checks_install  # noqa: F401 - registers its checks
import checks_issue40  # noqa: F401
import checks_runs  # noqa: F401
from walkkit import EXPECTATIONS, USER, Walk, fails, one_line

MARK = "WALK-VERDICT "


def main(names: list[str], timeout: int) -> None:
    chosen = [e for e in EXPECTATIONS if e.name in names]
    walk = Walk(USER / "walk", timeout)
    try:
        for item in chosen:
            start = time.perf_counter()
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    verdict = item.check(walk)
            except Exception as error:  # noqa: BLE001  (a check that raises is a failure, named)
                verdict = fails(f"{type(error).__name__}: {one_line(error, 160)}")
            seconds = time.perf_counter() - start
            print(MARK + json.dumps({"name": item.name, "status": verdict.status,
                                     "reason": one_line(verdict.reason, 300),
                                     "seconds": round(seconds, 1)}), flush=True)
    finally:
        walk.close()


if __name__ == "__main__":
    assert Path.cwd().resolve() == USER, "run in the user's folder"
    main(sys.argv[2:], int(sys.argv[1]))
