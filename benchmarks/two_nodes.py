"""Two torchrun "nodes" on one host against one node of as many ranks: the same seeded quickstart run, the same
metrics rows and the same weights (within a float tolerance). Each node is its own torchrun process
(`--nnodes 2 --nproc_per_node G --node_rank i --rdzv_backend c10d --rdzv_endpoint localhost:<port>`, each node given
its own G GPUs through CUDA_VISIBLE_DEVICES), as two hosts would run it; the reference is one
`--nnodes 1 --nproc_per_node 2G` launch. Prints one JSON line (the differences, the rows compared, the largest
weight difference, seconds per launch) and exits 1 when the runs differ.

On a 4-GPU host (2 nodes x 2 GPUs against 1 x 4; the embedded SmolLM2-135M, the quickstart's GPU preset cut to
4 iterations; a few minutes):

    python benchmarks/two_nodes.py --gpus-per-node 2

On the CPU (gloo, a tiny model built here; what tests/test_elastic.py runs, 2 nodes x 1 rank against 1 x 2):

    python benchmarks/two_nodes.py --cpu --gpus-per-node 1

GPU collectives may sum in another order when the ranks are split over two communicators' worth of nodes; if the
two runs differ only beyond the default tolerance, `--rtol`/`--atol` loosen it and `--repeat-reference` runs the
1-node launch twice, to show how far one launch differs from itself.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import elastic_runs  # noqa: E402

GPU_ARGS = ["--preset", "gpu", "--train_iterations", "4", "--eval_episodes", "64", "--eval_every", "2",
            "--save_every", "2"]
# the CPU check: a tiny model that answers one random digit (tests/tiny_models.py), level-0 sums, mixed rewards
CPU_ARGS = ["--preset", "cpu", "--level", "0", "--train_iterations", "6", "--prompts_per_iteration", "4",
            "--samples_per_prompt", "4", "--max_new_tokens", "6", "--eval_episodes", "4", "--eval_every", "0",
            "--micro_batch_size", "3", "--learning_rate", "3e-2", "--save_every", "1", "--keep_checkpoints", "2",
            "--no-eval_at_start", "--no-progress", "--seed", "2"]  # seed 2: every iteration has mixed groups


def launch_one_node(workdir: Path, name: str, ranks: int, args: list[str], cpu: bool):
    """Start one `--nnodes 1 --nproc_per_node ranks` launch into `workdir/name`; (processes, logs)."""
    log = workdir / f"{name}.log"
    env = elastic_runs.environment("" if cpu else ",".join(map(str, range(ranks))))
    command = [*elastic_runs.torchrun(1, ranks), str(elastic_runs.QUICKSTART), *args,
               "--output_dir", str(workdir / name)]
    return [elastic_runs.start(command, env, log)], [log]


def launch_two_nodes(workdir: Path, name: str, per_node: int, args: list[str], cpu: bool):
    """Start two torchrun "nodes" of `per_node` ranks each, meeting at a c10d endpoint on localhost."""
    endpoint = f"localhost:{elastic_runs.free_port()}"
    procs, logs = [], []
    for node in (0, 1):
        devices = "" if cpu else ",".join(str(node * per_node + i) for i in range(per_node))
        log = workdir / f"{name}-node{node}.log"
        command = [*elastic_runs.torchrun(2, per_node, node, endpoint), str(elastic_runs.QUICKSTART), *args,
                   "--output_dir", str(workdir / name)]
        procs.append(elastic_runs.start(command, elastic_runs.environment(devices), log))
        logs.append(log)
    return procs, logs


def wait_all(procs, logs, started: float) -> float:
    """Wait for a launch's torchrun processes (an AssertionError with a log's tail when one failed); seconds since
    `started`."""
    for proc, log in zip(procs, logs):
        elastic_runs.finish(proc, log, timeout=3600)
    return time.perf_counter() - started


def tiny_model(workdir: Path) -> str:
    from lmgym.policies import build_tiny_tokenizer
    from tests.tiny_models import digit_answer_model

    folder = workdir / "tiny_model"
    tokenizer = build_tiny_tokenizer()
    digit_answer_model(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus-per-node", type=int, default=2, help="ranks per node (GPUs, or CPU processes)")
    parser.add_argument("--cpu", action="store_true", help="gloo on the CPU, a tiny model (both launches at once)")
    parser.add_argument("--model", default=None, help="the model (default: the embedded one; --cpu: a tiny one)")
    parser.add_argument("--workdir", default=None, help="run folders and logs (default: a temporary folder, kept)")
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--atol", type=float, default=1e-6)
    parser.add_argument("--repeat-reference", action="store_true", help="run the 1-node launch twice, compare them")
    args, extra = parser.parse_known_args(argv)  # anything else goes to the quickstart (e.g. --data_parallel fsdp)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="two-nodes-"))
    workdir.mkdir(parents=True, exist_ok=True)
    model = args.model or (tiny_model(workdir) if args.cpu else None)
    run_args = [*(CPU_ARGS if args.cpu else GPU_ARGS), *(["--model", model] if model else []), *extra]
    per_node, seconds = args.gpus_per_node, {}
    launches = [("one_node", lambda: launch_one_node(workdir, "one_node", 2 * per_node, run_args, args.cpu)),
                ("two_nodes", lambda: launch_two_nodes(workdir, "two_nodes", per_node, run_args, args.cpu))]
    if args.repeat_reference:
        launches.append(("one_node_again",
                         lambda: launch_one_node(workdir, "one_node_again", 2 * per_node, run_args, args.cpu)))
    if args.cpu:  # no devices to share: all at once
        started = [(name, time.perf_counter(), *launch()) for name, launch in launches]
        for name, began, procs, logs in started:
            seconds[name] = round(wait_all(procs, logs, began), 1)
    else:  # the same GPUs, one launch after the other
        for name, launch in launches:
            began = time.perf_counter()
            seconds[name] = round(wait_all(*launch(), began), 1)
    result = {"nodes": 2, "ranks_per_node": per_node, "device": "cpu" if args.cpu else "cuda",
              **elastic_runs.compare(workdir / "two_nodes", workdir / "one_node", args.rtol, args.atol),
              "seconds": seconds, "workdir": str(workdir)}
    if args.repeat_reference:
        again = elastic_runs.compare(workdir / "one_node_again", workdir / "one_node", args.rtol, args.atol)
        result["one_node_against_itself"] = {k: again[k] for k in ("differences", "max_weight_diff")}
    print(json.dumps(result))
    return 1 if result["differences"] else 0


if __name__ == "__main__":
    sys.exit(main())
