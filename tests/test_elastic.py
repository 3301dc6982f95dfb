"""Past one host and a lost rank, on the CPU with gloo ranks and a tiny model (tests/elastic_runs.py):

- two torchrun "nodes" (`--nnodes 2 --nproc_per_node 1`, c10d rendezvous on localhost; benchmarks/two_nodes.py
  --cpu launches them) equal one `--nnodes 1 --nproc_per_node 2` launch of the same seed: the same metrics rows,
  the same weights;
- under `torchrun --max-restarts 1`, a rank SIGKILLed at seeded points (a random rank, a random delay after a
  given checkpoint is complete) restarts every rank; each restart resumes by itself (no --resume) from the newest
  complete checkpoint on disk, and the finished DDP run equals the uninterrupted one. (The same under FSDP is
  benchmarks/kill_restart.py --cpu --data_parallel fsdp, run by hand: another ~60 s; the FSDP checkpoint that lost
  a rank's shard is tests/test_fsdp_checkpoints.py's.)

The three launches run at once.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.two_nodes import CPU_ARGS
from tests import elastic_runs
from tests.tiers import slow

pytestmark = slow  # the slow tier (tests/tiers.py): two torchrun nodes (654 s of set-up on the CI machine kind)

ROOT = Path(__file__).resolve().parents[1]

ITERATIONS = 6  # CPU_ARGS's train_iterations, one checkpoint each
SEED = 7  # the kill plan: rank 0 (the rank that writes the run folder) a moment after checkpoint-3
KILLS = 1  # one restart: each kill costs two ranks' start-up on the suite's two cores (benchmarks/kill_restart.py
# and the RESULTS section run two and three)


@pytest.fixture(scope="module")
def launches(tmp_path_factory) -> dict:
    """All at once (they share two cores): benchmarks/two_nodes.py --cpu (the 1-node reference, one_node/, and the
    2-node run, two_nodes/) in a subprocess, and the killed DDP run (killed/) delivered from here."""
    from tests.tiny_models import digit_answer_model, save_tiny_model_dir

    model = save_tiny_model_dir(tmp_path_factory, digit_answer_model)
    workdir = tmp_path_factory.mktemp("elastic")
    bench = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "two_nodes.py"), "--cpu", "--gpus-per-node",
                              "1", "--model", model, "--workdir", str(workdir)], cwd=ROOT,
                             env=elastic_runs.environment(""), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    plan = elastic_runs.kill_plan(SEED, kills=KILLS, iterations=ITERATIONS)
    command = [*elastic_runs.torchrun(1, 2, max_restarts=len(plan)), str(elastic_runs.QUICKSTART), *CPU_ARGS,
               "--model", model, "--output_dir", str(workdir / "killed")]
    try:
        killed = elastic_runs.run_with_kills(command, elastic_runs.environment(""), workdir / "killed", plan,
                                             workdir / "killed.log")
    finally:
        out, err = bench.communicate(timeout=600)
    assert bench.returncode in (0, 1), out[-2000:] + err[-4000:]
    return {"two_nodes": json.loads(out.strip().splitlines()[-1]), "killed": killed, "plan": plan,
            "command": command, "workdir": workdir}


def tail(log: str) -> str:
    """The end of a launch's log without progress-bar lines."""
    return "\n".join(line for line in log.splitlines() if "\x1b" not in line and "[A" not in line)[-3000:]


def test_two_torchrun_nodes_equal_one_node_of_two_ranks(launches):
    summary, workdir = launches["two_nodes"], launches["workdir"]
    assert summary["differences"] == [] and summary["rows"] == ITERATIONS, summary
    one, two = elastic_runs.rows(workdir / "one_node"), elastic_runs.rows(workdir / "two_nodes")
    assert one == two  # exactly: the same collectives over the same two ranks
    for name, tensor in elastic_runs.weights(workdir / "two_nodes").items():
        assert tensor.equal(elastic_runs.weights(workdir / "one_node")[name]), name
    # both launches ran the global batch over two ranks (4 prompts x 4 samples), and it learned something
    assert all(len(r["rewards"]) == 16 for r in two) and all(r["grad_norm"] > 0 for r in two)
    assert any(0 < r["reward"] < 1 for r in two)
    # two torchrun processes of one rank each met at the rendezvous: one world, its rank 0 (which alone prints) on
    # one of them
    logs = [(workdir / f"two_nodes-node{node}.log").read_text() for node in (0, 1)]
    assert sorted(log.count("held-out accuracy:") for log in logs) == [0, 1], logs


def test_a_killed_rank_costs_at_most_one_checkpoint_and_the_run_ends_as_an_uninterrupted_one(launches):
    result, workdir = launches["killed"], launches["workdir"]
    seen = {k: result[k] for k in ("kills", "resumed_from", "expected_from")}
    assert [k["rank"] for k in result["kills"]] == [0], (seen, tail(result["log"]))
    # each restart resumed, without --resume, from the newest complete checkpoint its workers found
    assert "--resume" not in launches["command"]
    assert len(result["expected_from"]) == len(result["kills"]), (seen, tail(result["log"]))
    assert result["resumed_from"] == result["expected_from"] and None not in result["expected_from"], seen
    # ... and it ends as the uninterrupted 1-node run: the same rows, the same weights within float tolerance
    compared = elastic_runs.compare(workdir / "killed", workdir / "one_node")
    assert compared["differences"] == [], compared
