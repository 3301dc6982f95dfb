"""The user-habits walk (issues 27 and 40): what an engineer who already uses TRL, transformers, peft, gymnasium,
wandb and the OpenAI client tries on a new toolkit, each tried for real and graded works / partly / fails with a
one-line reason.

    python benchmarks/user_habits_walk.py                  # every check; a table, and the JSON below
    python benchmarks/user_habits_walk.py --only cli_help --only ctrl_c_one_line_130
    python benchmarks/user_habits_walk.py --list
    python benchmarks/user_habits_walk.py --deps index     # the venv gets its packages from an index (network)

Every check runs as the user runs it, outside the repository: this script builds the wheel of this tree
(`pip wheel`), installs it into a fresh venv, makes a user folder with its own `envs/` and `training/` packages
and the examples and docs blocks a user copies, then runs each check there with the venv's `python` (user code
importing the installed `lmgym`, or the `lmgym` command). How the venv gets torch and the rest without a
network, and why that equals `pip install dist/*.whl` for what is checked: benchmarks/user_walk/harness.py.
The checks are benchmarks/user_walk/checks_*.py (issue 27's and issue 40's); checks that share a run or a server
run in one process (their `group`). Everything is offline, on the CPU, with the tiny model built in code (saved
to the user's folder where a path is needed); the embedded SmolLM2 is loaded where a check is about it. `works`
means the behaviour is what such a user expects; `partly` states the gap; `fails` says what happened. A check
that raises, or a process that dies, is `fails` with its last line. Results:
statics/results/user_habits_walk/results.json (or --out).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks" / "user_walk"))  # the harness and the checks' list (no lmgym import)

import checks_install  # noqa: E402,F401 - registers its checks
import checks_issue40  # noqa: E402,F401
import checks_runs  # noqa: E402,F401
from harness import UserMachine, user_machine  # noqa: E402
from walkkit import EXPECTATIONS, FAILS, PARTLY, WORKS, Expectation, last_lines  # noqa: E402
from walkrun import MARK  # noqa: E402

DEFAULT_OUT = ROOT / "statics" / "results" / "user_habits_walk" / "results.json"
# issue 27's checks first, in their old order, then issue 40's (a stable sort keeps each file's order)
MODULES = [checks_install.__name__, checks_runs.__name__, checks_issue40.__name__]
EXPECTATIONS.sort(key=lambda item: MODULES.index(item.check.__module__))


def groups_of(chosen: list[Expectation]) -> list[list[Expectation]]:
    """The chosen checks by group, groups in the order of their first check."""
    grouped: dict[str, list[Expectation]] = {}
    for item in chosen:
        grouped.setdefault(item.group, []).append(item)
    return list(grouped.values())


def run_group(machine: UserMachine, group: list[Expectation], timeout: int) -> dict[str, dict]:
    """One process of the venv's python in the user's folder running `group`; its verdicts by name. A check
    without a verdict (the process died or ran out of time) is `fails` with the process's last lines."""
    names = [item.name for item in group]
    command = [str(machine.python), "walkrun.py", str(timeout), *names]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=machine.user, env=machine.env(), capture_output=True, text=True,
                              timeout=timeout * (len(group) + 2))
        out, err, code = done.stdout, done.stderr, done.returncode
    except subprocess.TimeoutExpired as expired:
        out = expired.stdout.decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
        err, code = f"the group ran past {expired.timeout:.0f} s", None
    verdicts = {}
    for line in out.splitlines():
        if line.startswith(MARK):
            verdict = json.loads(line[len(MARK):])
            verdicts[verdict.pop("name")] = verdict
    seconds = round(time.perf_counter() - start, 1)
    for name in names:
        verdicts.setdefault(name, {"status": FAILS, "reason": f"no verdict (exit {code}): {last_lines(err)}",
                                   "seconds": seconds})
    return verdicts


def run_walk(machine: UserMachine, names: list[str] | None, timeout: int) -> list[dict]:
    chosen = [e for e in EXPECTATIONS if names is None or e.name in names]
    unknown = set(names or []) - {e.name for e in EXPECTATIONS}
    if unknown:
        raise SystemExit(f"unknown expectation(s): {sorted(unknown)}; --list shows them")
    results, number = [], 0
    for group in groups_of(chosen):
        verdicts = run_group(machine, group, timeout)
        for item in group:
            number += 1
            verdict = verdicts[item.name]
            results.append({"name": item.name, "area": item.area, "expects": item.expects, **verdict})
            print(f"[{number:2d}/{len(chosen)}] {verdict['status']:6s} {item.name} ({verdict['seconds']:.0f} s)",
                  flush=True)
    return results


def table(results: list[dict]) -> str:
    lines = ["| # | area | expectation | result | why |", "| --- | --- | --- | --- | --- |"]
    for number, r in enumerate(results, 1):
        lines.append(f"| {number} | {r['area']} | {r['expects']} | {r['status']} | {r['reason']} |")
    return "\n".join(lines)


def counts(results: list[dict]) -> dict[str, int]:
    return {status: sum(r["status"] == status for r in results) for status in (WORKS, PARTLY, FAILS)}


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except OSError:
        return ""


def versions(machine: UserMachine) -> dict[str, str]:
    """Python, torch and transformers as the venv's python sees them."""
    code = ("import json, platform, torch, transformers; print(json.dumps({'python': platform.python_version(), "
            "'torch': torch.__version__, 'transformers': transformers.__version__}))")
    done = subprocess.run([str(machine.python), "-c", code], cwd=machine.user, env=machine.env(), capture_output=True,
                          text=True, timeout=300)
    return json.loads(done.stdout) if done.returncode == 0 else {"python": platform.python_version()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", default=None, help="run this expectation only (repeatable)")
    parser.add_argument("--list", action="store_true", help="print the expectations' names and exit")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="results JSON (default: %(default)s)")
    parser.add_argument("--timeout", type=int, default=300, help="seconds any one subprocess may take")
    parser.add_argument("--deps", choices=("shared", "index"), default="shared",
                        help="the venv's third-party packages: this interpreter's, offline (default), or "
                             "`pip install <wheel>[all,test]` from an index")
    parser.add_argument("--wheel", default=None, help="install this wheel instead of building one")
    parser.add_argument("--keep", default=None, help="build the venv and user folder here and keep them")
    args = parser.parse_args(argv)
    if args.list:
        for item in EXPECTATIONS:
            print(f"{item.name:32s} {item.expects}")
        return
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="user_habits_walk_") as scratch:
        folder = Path(args.keep or scratch)
        machine = user_machine(folder, args.deps, Path(args.wheel).resolve() if args.wheel else None)
        print(f"wheel {machine.wheel.name}, venv {machine.venv}, user folder {machine.user}", flush=True)
        results = run_walk(machine, args.only, args.timeout)
        seen = versions(machine)
    minutes = (time.perf_counter() - start) / 60
    total = counts(results)
    print()
    print(table(results))
    print(f"\n{len(results)} expectations: {total[WORKS]} work, {total[PARTLY]} partly, {total[FAILS]} fail "
          f"({minutes:.1f} min)")
    if args.only is None:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({
            "counts": total, "expectations": len(results), "minutes": round(minutes, 1), "commit": git_commit(),
            "wheel": machine.wheel.name, "deps": args.deps, **seen, "cpu_count": os.cpu_count(),
            "command": "python benchmarks/user_habits_walk.py", "results": results,
        }, indent=2) + "\n")
        print(f"written: {out}")


if __name__ == "__main__":
    main()
