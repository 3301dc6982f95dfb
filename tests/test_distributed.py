"""Two CPU processes (gloo) taking one GRPO step on half the groups each == one process on all of them."""
import socket

import torch
import torch.multiprocessing as mp

from tests.distributed_worker import fixed_trajectories, one_step, run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_match_one_process(tmp_path):
    mp.spawn(run, args=(2, free_port(), str(tmp_path)), nprocs=2, join=True)
    rank0 = torch.load(tmp_path / "rank0.pt")
    rank1 = torch.load(tmp_path / "rank1.pt")
    single = one_step(fixed_trajectories(), str(tmp_path / "single"))
    for name, value in single.items():
        assert torch.equal(rank0[name], rank1[name]), name  # ranks stay in sync
        assert torch.allclose(rank0[name], value, atol=1e-6, rtol=1e-5), name  # same step as one process
