"""A lost rank under `torchrun --max-restarts`: the seeded quickstart run with ranks SIGKILLed at seeded points (a
random rank, a random delay after a given checkpoint is complete; tests/elastic_runs.py), against the same run
uninterrupted. Each restart must resume, with no --resume, from the newest complete checkpoint on disk, and the
finished run must equal the uninterrupted one: the same metrics rows, the same weights within float tolerance.
Prints one JSON line (kills, the iterations resumed from and expected, differences, seconds); exits 1 on a
mismatch.

On the CPU (gloo, 2 ranks, a tiny model; tests/test_elastic.py runs the DDP case with --kills 1 --seed 7):

    python benchmarks/kill_restart.py --cpu --data_parallel fsdp --kills 2 --seed 4

On a 4-GPU host (4 ranks, the embedded model, the quickstart's GPU preset cut to 6 iterations, a checkpoint
each; the uninterrupted run first, then the killed one):

    python benchmarks/kill_restart.py --ranks 4 --data_parallel fsdp --kills 3 --seed 0
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.two_nodes import CPU_ARGS, tiny_model  # noqa: E402
from tests import elastic_runs  # noqa: E402

GPU_ARGS = ["--preset", "gpu", "--train_iterations", "6", "--eval_episodes", "64", "--eval_every", "0",
            "--save_every", "1", "--keep_checkpoints", "2", "--no-progress"]


def iterations(args: list[str]) -> int:
    """The --train_iterations in `args` (the last one given)."""
    return int([a for i, a in enumerate(args[1:]) if args[i] == "--train_iterations"][-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2, help="ranks on this node (GPUs, or CPU processes)")
    parser.add_argument("--cpu", action="store_true", help="gloo on the CPU, a tiny model (both runs at once)")
    parser.add_argument("--data_parallel", default="ddp", choices=("ddp", "fsdp", "allreduce"))
    parser.add_argument("--kills", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=None, help="the model (default: the embedded one; --cpu: a tiny one)")
    parser.add_argument("--workdir", default=None, help="run folders and logs (default: a temporary folder, kept)")
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--atol", type=float, default=1e-6)
    args = parser.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="kill-restart-"))
    workdir.mkdir(parents=True, exist_ok=True)
    model = args.model or (tiny_model(workdir) if args.cpu else None)
    run_args = [*(CPU_ARGS if args.cpu else GPU_ARGS), *(["--model", model] if model else []),
                "--data_parallel", args.data_parallel]
    env = elastic_runs.environment("" if args.cpu else ",".join(map(str, range(args.ranks))))
    plan = elastic_runs.kill_plan(args.seed, args.kills, iterations(run_args), world=args.ranks)
    quickstart = [str(elastic_runs.QUICKSTART), *run_args, "--output_dir"]
    started = time.perf_counter()
    reference = elastic_runs.start([*elastic_runs.torchrun(1, args.ranks), *quickstart, str(workdir / "reference")],
                                   env, workdir / "reference.log")
    if not args.cpu:  # the same GPUs: one run after the other
        elastic_runs.finish(reference, workdir / "reference.log", timeout=3600)
    reference_s = time.perf_counter() - started
    killed_started = time.perf_counter()
    result = elastic_runs.run_with_kills([*elastic_runs.torchrun(1, args.ranks, max_restarts=len(plan)), *quickstart,
                                          str(workdir / "killed")], env, workdir / "killed", plan,
                                         workdir / "killed.log", world=args.ranks, timeout=3600)
    killed_s = time.perf_counter() - killed_started
    if args.cpu:
        elastic_runs.finish(reference, workdir / "reference.log", timeout=3600)
        reference_s = time.perf_counter() - started
    compared = elastic_runs.compare(workdir / "killed", workdir / "reference", args.rtol, args.atol)
    summary = {"data_parallel": args.data_parallel, "ranks": args.ranks, "device": "cpu" if args.cpu else "cuda",
               "plan": [vars(k) for k in plan], "kills": result["kills"], "resumed_from": result["resumed_from"],
               "expected_from": result["expected_from"], **compared,
               "seconds": {"reference": round(reference_s, 1), "killed": round(killed_s, 1)}, "workdir": str(workdir)}
    print(json.dumps(summary))
    resumed_right = result["resumed_from"] == result["expected_from"] and None not in result["expected_from"]
    return 0 if resumed_right and len(result["expected_from"]) == len(result["kills"]) and not compared[
        "differences"] else 1


if __name__ == "__main__":
    sys.exit(main())
