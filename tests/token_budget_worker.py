"""Worker for tests/test_token_batches_ranks.py: one rank of a 2-process gloo group taking two GRPO update steps
with `max_tokens_per_microbatch`, where one rank holds short episodes (one micro-batch) and the other long ones
(four), under DDP (counts may differ) and FSDP (counts made equal); then FSDP's refusal when a rank holds too few
episodes to run as many micro-batches as the other."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lmgym.training import distributed as dist  # noqa: E402
from tests.distributed_worker import build_algorithm, count_synced_backwards, join_gloo, whole  # noqa: E402

BUDGET = 24  # padded tokens: the short group's 4 rows of <= 6 fit at once; the long group's rows of 12..15 go alone
CASES = (("ddp", "ddp", "kl"), ("fsdp", "fsdp", "lora_kl"))  # fsdp + LoRA: the reference forward is sharded too


def budget_trajectories():
    """Group 0: four short episodes (rows of 5-6 tokens); group 1: four long ones (rows of 12-15)."""
    from lmgym.buffers import Trajectory

    trajs = []
    for i, n in enumerate([2, 3, 2, 3, 9, 11, 10, 12]):
        ids = [(7 * i + 3 * j) % 90 + 3 for j in range(n)]
        trajs.append(Trajectory([1, 5, 9 + i % 3], ids, [-2.0 - 0.1 * j for j in range(n)], [1] * n,
                                reward=float(i % 2), group_id=i // 4))
    return trajs


def two_steps(algo, trajectories, passes: list[int]) -> dict[str, torch.Tensor]:
    """prepare + two optimizer steps; `passes` gets the micro-batch count of every pass; the parameters after."""
    micro_batches = algo.micro_batches

    def counted(items):
        groups = micro_batches(items)
        passes.append(len(groups))
        return groups

    algo.micro_batches = counted
    algo.prepare(trajectories)
    algo.update_step(trajectories)
    algo.update_step(trajectories)
    return {n: whole(p) for n, p in algo.policy.model.named_parameters() if p.requires_grad}


def one_process(output_dir: str, variant: str) -> dict[str, torch.Tensor]:
    """The same two steps in one process on both groups, in micro-batches of `micro_batch_size` (no budget)."""
    return two_steps(build_algorithm(output_dir, "allreduce", variant), budget_trajectories(), [])


def run(rank: int, world: int, port: int, out_dir: str, cases=CASES) -> None:
    join_gloo(rank, world, port)
    mine = [t for t in budget_trajectories() if t.group_id == rank]
    algo = None
    for name, data_parallel, variant in cases:
        counts: list[int] = []
        passes: list[int] = []
        algo = build_algorithm(str(Path(out_dir) / name), data_parallel, variant, max_tokens_per_microbatch=BUDGET)
        if data_parallel == "ddp":
            count_synced_backwards(algo, counts)
        params = two_steps(algo, mine, passes)
        torch.save({"params": params, "synced_backwards": sum(counts), "passes": passes},
                   Path(out_dir) / f"{name}_rank{rank}.pt")
    try:  # under FSDP, rank 0 with 2 short episodes cannot run the 4 micro-batches rank 1's long ones need
        algo.micro_batches(mine[:2] if rank == 0 else mine)
        refusal = None
    except ValueError as err:
        refusal = str(err)
    Path(out_dir, f"refusal_rank{rank}.txt").write_text(str(refusal))
    del algo
    dist.destroy()
