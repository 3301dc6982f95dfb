"""Kill-and-resume harness: a tiny seeded GRPO run, killed with SIGKILL and resumed until it completes.

Each attempt is a child process forked from this (torch-importing, single-threaded) process, so a kill
is a real SIGKILL of a real process, without paying the interpreter start-up per attempt. Kills come
either from tests/faults.py (installed in the child only: it patches the library's file operations and
kills the child at an exact file-operation boundary) or from the parent after a random delay. The result is
compared with an uninterrupted run: final parameters, optimizer state and metrics.jsonl (the machine's measurements
aside: timing and memory columns) must be equal. On a GPU (benchmarks/kill_resume.py --device cuda) each attempt
asks torch for deterministic kernels, and a second uninterrupted run says whether two runs agree at all.

Used by tests/test_kill_resume.py and benchmarks/kill_resume.py; as a script it prints a JSON summary:
    python tests/kill_harness.py --trials 3 --seed 0
"""
from __future__ import annotations

import json
import os
import random
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("WANDB_MODE", "disabled")

import torch  # noqa: E402

torch.set_num_threads(1)  # no OpenMP pool in the parent: forking is safe, and every child computes alike

from lmgym.algorithms import GRPO, GRPOConfig  # noqa: E402  (imported once here; forked attempts start warm)
from lmgym.envs import make  # noqa: E402
from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer  # noqa: E402
from lmgym.training.checkpoints import folders as ckpt  # noqa: E402
from tests import checkpoint_state, faults  # noqa: E402
from tests.toy_env import DigitsEnv  # noqa: E402,F401  (registers ToyDigits-v0)

ITERATIONS = 5  # the crash-point sequence below assumes 5; benchmarks/kill_resume.py may set more
DEVICE = "cpu"  # benchmarks/kill_resume.py --device cuda: the run on a GPU (each forked attempt starts CUDA itself)
MEASURED = re.compile(r"^(time_.*|tokens_per_second|memory_.*)$")  # the machine's measurements, not training's


def train_child(run_dir: Path) -> None:
    """The training run (continues from its newest checkpoint; starts over when there is none).

    The end-of-run plot (metrics.png, redrawn from metrics.jsonl by every attempt) is not under test and
    is skipped, so that random kills land in training rather than in matplotlib."""
    import lmgym.training.plots

    lmgym.training.plots.plot_run = lambda *args, **kwargs: []  # what RunPlots draws with
    if DEVICE != "cpu":  # atomics-based CUDA kernels would make two uninterrupted runs differ already
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device=DEVICE)
    config = GRPOConfig(train_iterations=ITERATIONS, prompts_per_iteration=2, samples_per_prompt=2, max_new_tokens=6,
                        micro_batch_size=2, learning_rate=1e-2, kl_coeff=0.05, ref_sync_every=2, save_every=1,
                        keep_checkpoints=2, eval_at_start=True, eval_every=2, eval_episodes=2, progress=False,
                        output_dir=str(run_dir), seed=3)
    GRPO(policy, make("ToyDigits-v0"), config, eval_env=make("ToyDigits-v0")).train(resume=True)


@dataclass
class Attempt:
    outcome: str                 # "killed" or "completed"
    resumed_from: int | None     # iteration the attempt resumed from (None: started over, or killed before)
    decided: bool                # it got as far as choosing its checkpoint (or saying there was none)
    newest_after: int | None     # newest complete checkpoint when the attempt ended
    seconds: float
    first_checkpoint_s: float | None = None  # when a checkpoint folder first appeared (watched attempts only)


def run_attempt(run_dir: Path, log: Path, crash_at: str | None = None, kill_after: float | None = None,
                watch: bool = False) -> Attempt:
    """Fork one training attempt; kill it at the boundary `crash_at` ("<point>:<n>", tests/faults.py) or after
    `kill_after` seconds (parent); `watch`: note when the first checkpoint folder appears."""
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            if crash_at:
                faults.arm_sigkill(crash_at)
            train_child(run_dir)
            code = 0
        except BaseException:  # noqa: BLE001 - report and leave the child without running parent code
            import traceback

            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    status, first = None, None
    if kill_after is not None or watch:
        deadline = time.perf_counter() + (kill_after if kill_after is not None else float("inf"))
        while status is None and time.perf_counter() < deadline:
            done, code = os.waitpid(pid, os.WNOHANG)
            status = code if done else None
            if watch and first is None and any(ckpt.iteration_of(p) is not None for p in run_dir.glob("checkpoint-*")):
                first = time.perf_counter() - start
            time.sleep(0.005)
        if status is None:
            os.kill(pid, signal.SIGKILL)
    if status is None:
        _, status = os.waitpid(pid, 0)
    text = log.read_text()
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        outcome = "killed"
    elif os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        outcome = "completed"
    else:
        raise RuntimeError(f"training attempt failed (status {status}):\n{text[-3000:]}")
    found = re.search(r"resuming from .* \(iteration (\d+)\)", text)
    decided = bool(found) or "note: --resume: no checkpoint" in text
    return Attempt(outcome, int(found.group(1)) if found else None, decided, newest_checkpoint(run_dir),
                   time.perf_counter() - start, first)


def newest_checkpoint(run_dir: Path) -> int | None:
    """Iteration of the newest checkpoint folder that verifies, found here independently of the
    resume code under test (None when there is none)."""
    found = []
    for path in run_dir.glob("checkpoint-*"):
        if ckpt.iteration_of(path) is None:  # checkpoint-2.1.bak: an earlier run's, moved aside
            continue
        try:
            ckpt.verify(path)
            found.append(ckpt.iteration_of(path))
        except (ckpt.CheckpointError, ValueError):
            continue
    return max(found, default=None)


@dataclass
class Trial:
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def kills(self) -> int:
        return sum(a.outcome == "killed" for a in self.attempts)

    @property
    def kills_before_the_end(self) -> int:
        """Kills that landed before the last iteration's checkpoint was complete."""
        return sum(a.outcome == "killed" and (a.newest_after or 0) < ITERATIONS for a in self.attempts)

    @property
    def resumes(self) -> int:
        return sum(a.resumed_from is not None for a in self.attempts)

    @property
    def iterations_lost(self) -> int:
        """Checkpointed iterations a later attempt did not continue from (0 when every resume took the
        newest checkpoint that existed when the previous attempt was killed). An attempt killed before
        it chose where to continue changed nothing on disk and is not counted."""
        lost = 0
        for before, after in zip(self.attempts, self.attempts[1:]):
            if after.decided:
                lost += max((before.newest_after or 0) - (after.resumed_from or 0), 0)
        return lost


def run_trial(run_dir: Path, crash_points: list[str] = (), delays: list[float] = (), max_attempts: int = 40,
              watch: bool = False) -> Trial:
    """Attempts with the given boundary kills, then the given timed kills (until the run completes), then
    plain resumes until done; `watch`: the attempts note when their first checkpoint appears."""
    run_dir.mkdir(parents=True, exist_ok=True)
    logs = run_dir.parent / f"{run_dir.name}-logs"
    logs.mkdir(exist_ok=True)
    trial = Trial()
    plan = [(p, None) for p in crash_points] + [(None, d) for d in delays]
    while True:
        crash_at, delay = plan.pop(0) if plan else (None, None)
        attempt = run_attempt(run_dir, logs / f"attempt-{len(trial.attempts):03d}.txt", crash_at, delay, watch)
        trial.attempts.append(attempt)
        if attempt.outcome == "completed" and (not plan or delay is not None):
            return trial  # a timed trial ends with the run; boundary kills all get their attempt
        if len(trial.attempts) >= max_attempts:
            raise RuntimeError(f"{run_dir}: no completion after {max_attempts} attempts")


def fingerprint(run_dir: Path) -> dict:
    """Final parameters and optimizer state (from the last checkpoint) and the metrics rows."""
    final = newest_checkpoint(run_dir)
    state = checkpoint_state.read(run_dir / f"checkpoint-{final}")
    rows = [{k: v for k, v in json.loads(line).items() if not MEASURED.match(k)}
            for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {"iteration": final, "policy": state["policy"], "optimizer": state["optimizer"]["state"],
            "rows": rows}


def differences(a: dict, b: dict) -> list[str]:
    """What differs between two fingerprints (empty when equal, exactly)."""
    out = []
    if a["iteration"] != b["iteration"]:
        out.append(f"final iteration {a['iteration']} != {b['iteration']}")
    if a["rows"] != b["rows"]:
        keys = sorted({k for x, y in zip(a["rows"], b["rows"]) for k in x.keys() | y.keys() if x.get(k) != y.get(k)})
        out.append(f"metrics.jsonl differs ({len(a['rows'])} vs {len(b['rows'])} rows; columns {', '.join(keys[:4])})")
    for name in a["policy"]:
        if not torch.equal(a["policy"][name], b["policy"][name]):
            out.append(f"parameter {name} differs")
    for index, entry in a["optimizer"].items():
        for key, value in entry.items():
            if not torch.equal(torch.as_tensor(value), torch.as_tensor(b["optimizer"][index][key])):
                out.append(f"optimizer state {index}.{key} differs")
    return out


# One attempt per entry, each killed at the named boundary (its n-th arrival in that attempt). With
# ITERATIONS=5, save_every=1 and keep_checkpoints=2 every one of them is reached; the comments give
# the state each kill leaves (C: newest complete checkpoint).
CRASH_SEQUENCE = [
    "config.before_replace:1",    # before anything: nothing to resume
    "metrics.written:1",          # row 0 logged, no checkpoint: the next attempt starts over, row 0 moved aside
    "archive.moved:1",            # ... and is killed once metrics.jsonl is moved aside (as metrics.1.jsonl.bak)
    "metrics.write:3",            # half of row 2 on disk, C=1
    "save.model.safetensors:1",   # row 2 logged, checkpoint 2 not written yet
    "save.rng_state.pth:1",       # ... and again with its weights, optimizer and scheduler files written
    "save.trainer_state.json:1",  # ... and again with all its state files written, no buffer or manifest
    "truncate.side_file:1",       # inside truncate_after (row 2 set aside, file not yet rewritten)
    "truncate.before_replace:1",  # inside truncate_after (new file written, not yet renamed)
    "truncate.after_replace:1",   # inside truncate_after (renamed)
    "save.manifest:1",            # checkpoint 2 complete in its temp folder, not renamed
    "save.renamed:1",             # C=2, older ones not yet pruned
    "remove.file:2",              # C=3, pruning checkpoint-1 killed between two file deletions
    "remove.renamed:1",           # C=4, checkpoint-2 renamed to .trash- and not yet deleted
    "metrics.written:1",          # row 5 logged, C=4
    "save.pruned:1",              # C=5 (the last), pruning interrupted
]


def reference_run(workdir: Path) -> tuple[dict, float]:
    """Fingerprint and seconds of an uninterrupted run."""
    trial = run_trial(workdir / "reference")
    return fingerprint(workdir / "reference"), trial.attempts[0].seconds


def repeat_run(workdir: Path, expected: dict) -> tuple[list[str], float, float]:
    """A second uninterrupted run: how it differs from the first, its seconds and when its first checkpoint
    appeared. On a GPU the first run's seconds include compiling kernels that later runs find cached, and most of
    an attempt is starting CUDA and the model (on the H200, 12 of 14 s), so random kill times are drawn from this
    run's span between its first checkpoint and its end: a kill before any checkpoint shows no resume."""
    trial = run_trial(workdir / "repeat", watch=True)
    attempt = trial.attempts[0]
    return (differences(fingerprint(workdir / "repeat"), expected), attempt.seconds,
            attempt.first_checkpoint_s or 0.0)


def crash_point_trial(workdir: Path, expected: dict) -> dict:
    """The run killed once at each boundary of CRASH_SEQUENCE, then completed; compared with `expected`."""
    trial = run_trial(workdir / "points", crash_points=CRASH_SEQUENCE)
    return {"crash_points": CRASH_SEQUENCE, "outcomes": [a.outcome for a in trial.attempts],
            "resumed_from": [a.resumed_from for a in trial.attempts], "kills": trial.kills,
            "iterations_lost": trial.iterations_lost, "differences": differences(fingerprint(workdir / "points"),
                                                                                   expected)}


def random_trials(workdir: Path, trials: int, seed: int, max_kills: int = 4,
                  reference: tuple[dict, float] | None = None) -> dict:
    """`trials` runs killed at random moments (up to `max_kills` each), compared with an uninterrupted run."""
    expected, duration = reference or reference_run(workdir)
    repeat, first = None, 0.0
    if DEVICE != "cpu":
        repeat, duration, first = repeat_run(workdir, expected)
    rng = random.Random(seed)
    summary = {"trials": 0, "kills": 0, "kills_before_the_end": 0, "resumes": 0, "iterations_lost": 0, "mismatches": [],
               "reference_seconds": round(duration, 2), "repeat_differences": repeat,
               "first_checkpoint_seconds": round(first, 2) if repeat is not None else None}
    for t in range(trials):
        delays = [first + rng.uniform(0.02, 0.9) * (duration - first) for _ in range(rng.randint(1, max_kills))]
        trial = run_trial(workdir / f"trial-{t:03d}", delays=delays)
        summary["trials"] += 1
        summary["kills"] += trial.kills
        summary["kills_before_the_end"] += trial.kills_before_the_end
        summary["resumes"] += trial.resumes
        summary["iterations_lost"] += trial.iterations_lost
        diff = differences(fingerprint(workdir / f"trial-{t:03d}"), expected)
        if diff:
            summary["mismatches"].append({"trial": t, "differences": diff[:5]})
    return summary


if __name__ == "__main__":
    import argparse
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--points", action="store_true", help="also run the crash-point sequence")
    parser.add_argument("--workdir", default=None, help="where the run folders go (default: a temporary folder)")
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="kill-resume-"))
    reference = reference_run(workdir)
    result = {"points": crash_point_trial(workdir, reference[0])} if args.points else {}
    result["random"] = random_trials(workdir, args.trials, args.seed, reference=reference)
    print(json.dumps(result))
