"""torchrun launches of the quickstart for the elastic tests (tests/test_elastic.py) and benchmarks/two_nodes.py.

- `torchrun`: the launcher's command for one "node" (`--nnodes 1` on a free port, or one of several nodes meeting
  at a c10d rendezvous endpoint), with `--max-restarts`;
- `compare`: what differs between two finished run folders: metrics.jsonl (timing columns aside) and the model
  folder's weights, floats within a tolerance;
- `run_with_kills`: one launch whose workers are SIGKILLed from outside by a seeded plan (`kill_plan`): the k-th
  kill waits for attempt k's workers (torchrun's TORCHELASTIC_RESTART_COUNT k) and for checkpoint-c to be
  complete (and, after a restart, for its "resuming from" line), then kills the planned rank after a random
  delay. Each restart is expected to resume from the newest complete checkpoint on disk when its workers start
  (the previous attempt's workers have all exited by then).
"""
from __future__ import annotations

import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from lmgym.training.checkpoints import folders as ckpt  # imported now: not while a restart is being timed

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart.py"
TIMING = ("time_", "tokens_per_second")  # wall-clock columns differ between any two runs
RESUMED = re.compile(r"resuming from \S+ \(iteration (\d+)\)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(nnodes: int, nproc: int, node_rank: int = 0, endpoint: str | None = None,
             max_restarts: int = 0) -> list[str]:
    """`python -m torch.distributed.run` for one node: `nnodes` 1 on a free local port, or node `node_rank` of
    `nnodes` meeting at the c10d rendezvous `endpoint` (host:port)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nnodes), "--nproc_per_node", str(nproc),
               "--max-restarts", str(max_restarts), "--monitor-interval", "0.1"]
    if endpoint is None:
        return [*command, "--master_addr", "127.0.0.1", "--master_port", str(free_port())]
    return [*command, "--node_rank", str(node_rank), "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint,
            "--rdzv_id", "two-nodes"]


def environment(devices: str | None = None) -> dict[str, str]:
    """The launch's environment: offline, one thread a rank, no torchrun variables inherited; `devices`: the
    CUDA_VISIBLE_DEVICES of this node ("" on the CPU)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled",
           "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(ROOT)}
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT"):
        env.pop(name, None)
    if devices is not None:
        env["CUDA_VISIBLE_DEVICES"] = devices
    return env


def start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    """Start `command` with its output (stdout and stderr) in `log`."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen, log: Path, timeout: float = 600) -> str:
    """Wait for `proc`; its log, or an AssertionError with the log's tail when it failed."""
    proc.wait(timeout=timeout)
    text = log.read_text()
    if proc.returncode != 0:
        raise AssertionError(f"{log}: exit {proc.returncode}\n{text[-4000:]}")
    return text


def rows(run_dir: Path) -> list[dict]:
    """metrics.jsonl without its timing columns."""
    lines = (Path(run_dir) / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if not k.startswith(TIMING)} for line in lines]


def weights(run_dir: Path) -> dict:
    """The trained model's tensors (`<run>/model/model.safetensors`)."""
    from safetensors.torch import load_file

    return load_file(str(Path(run_dir) / "model" / "model.safetensors"))


def same(a, b, rtol: float, atol: float) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=rtol,
                                                                                                abs_tol=atol)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y, rtol, atol) for x, y in zip(a, b))
    return a == b


def compare(got_dir: Path, want_dir: Path, rtol: float = 1e-5, atol: float = 1e-6) -> dict:
    """What differs between two finished runs: `differences` (empty: the same rows, weights within tolerance),
    the rows compared and the largest absolute weight difference."""
    import torch

    got_rows, want_rows = rows(got_dir), rows(want_dir)
    out = []
    if [r.get("iteration") for r in got_rows] != [r.get("iteration") for r in want_rows]:
        out.append(f"iterations {[r.get('iteration') for r in got_rows]} != {[r.get('iteration') for r in want_rows]}")
    for got, want in zip(got_rows, want_rows):
        for key in sorted(set(got) | set(want)):
            if not same(got.get(key), want.get(key), rtol, atol):
                out.append(f"iteration {want.get('iteration')}: {key} {got.get(key)!r} != {want.get(key)!r}")
    got_w, want_w = weights(got_dir), weights(want_dir)
    if set(got_w) != set(want_w):
        out.append(f"weight names differ: {sorted(set(got_w) ^ set(want_w))[:5]}")
    largest = 0.0
    for name in sorted(set(got_w) & set(want_w)):
        a, b = got_w[name].float(), want_w[name].float()
        if a.shape != b.shape:
            out.append(f"{name}: shape {tuple(a.shape)} != {tuple(b.shape)}")
            continue
        largest = max(largest, float((a - b).abs().max()) if a.numel() else 0.0)
        if not torch.allclose(a, b, rtol=rtol, atol=atol):
            out.append(f"{name}: differs by up to {float((a - b).abs().max()):.3g}")
    return {"differences": out, "rows": len(want_rows), "max_weight_diff": largest}


@dataclass
class Kill:
    """Kill rank `rank` of attempt k (the k-th entry of a plan) `delay_s` seconds after checkpoint-`after` is
    complete."""

    rank: int
    after: int
    delay_s: float


def kill_plan(seed: int, kills: int, iterations: int, world: int = 2, max_delay_s: float = 0.6) -> list[Kill]:
    """`kills` seeded kills at distinct checkpoints before the last, in order, each of a random rank."""
    rng = random.Random(seed)
    points = sorted(rng.sample(range(1, iterations), kills))
    return [Kill(rng.randrange(world), c, round(rng.uniform(0.0, max_delay_s), 3)) for c in points]


def workers(agent: int) -> dict[int, tuple[int, int]]:
    """The torchrun agent's live workers: rank -> (pid, restart count), read from /proc."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[1]) != agent:  # field 4: the parent's pid
                continue
            env = dict(item.split("=", 1) for item in (entry / "environ").read_bytes().decode(errors="replace")
                       .split("\0") if "=" in item)
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
        if "RANK" in env:
            found[int(env["RANK"])] = (int(entry.name), int(env.get("TORCHELASTIC_RESTART_COUNT", "0")))
    return found


def newest_checkpoint(run_dir: Path) -> int | None:
    """The newest checkpoint-N of `run_dir` that verifies (found here, independently of the resume code)."""
    found = []
    for path in Path(run_dir).glob("checkpoint-*"):
        try:
            ckpt.verify(path)
        except (ckpt.CheckpointError, ValueError):
            continue
        if ckpt.iteration_of(path) is not None:
            found.append(ckpt.iteration_of(path))
    return max(found, default=None)


def _wait(condition, proc: subprocess.Popen, timeout: float, what: str):
    """Poll `condition()` until it is truthy (returned) or `proc` ended (None)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc.poll() is not None:
            return None
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def attempt_workers(proc: subprocess.Popen, attempt: int, world: int, timeout: float) -> dict | None:
    """rank -> (pid, restart) once all `world` workers of attempt `attempt` (restart count) run; None: it ended."""
    def ready():
        found = workers(proc.pid)
        return found if len(found) == world and all(r == attempt for _, r in found.values()) else None

    return _wait(ready, proc, timeout, f"attempt {attempt}'s workers")


def run_with_kills(command: list[str], env: dict[str, str], run_dir: Path, plan: list[Kill], log: Path,
                   world: int = 2, timeout: float = 600) -> dict:
    """Launch `command` (torchrun with --max-restarts >= len(plan)) and deliver `plan`'s kills; when it ends,
    what happened: `kills` (each with its attempt), `resumed_from` (rank 0's "resuming from" lines, in order)
    and `expected_from` (the newest complete checkpoint when each restarted attempt's workers started)."""
    proc = start(command, env, log)
    delivered, expected = [], []
    try:
        for attempt, kill in enumerate(plan):
            pids = attempt_workers(proc, attempt, world, timeout)
            if pids is None:
                break
            if attempt > 0:  # every worker of the killed attempt has exited: the disk is as the restart finds it
                expected.append(newest_checkpoint(run_dir))
                # kill it once it has resumed (a kill before that changes nothing on disk)
                if _wait(lambda n=attempt: len(RESUMED.findall(log.read_text())) >= n, proc, timeout,
                         f"attempt {attempt}'s resume") is None:
                    break
            done = run_dir / f"checkpoint-{kill.after}" / "MANIFEST.json"
            if _wait(done.exists, proc, timeout, f"checkpoint-{kill.after}") is None:
                break
            time.sleep(kill.delay_s)
            try:
                os.kill(pids[kill.rank][0], signal.SIGKILL)
            except ProcessLookupError:  # it ended meanwhile (the run finished)
                break
            delivered.append({"attempt": attempt, **asdict(kill)})
        if delivered and attempt_workers(proc, len(delivered), world, timeout) is not None:
            expected.append(newest_checkpoint(run_dir))
        text = finish(proc, log, timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
    return {"kills": delivered, "resumed_from": [int(n) for n in RESUMED.findall(text)], "expected_from": expected,
            "log": text}
