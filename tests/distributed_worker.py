"""Worker for tests/test_distributed.py: one rank of a 2-process gloo group running one GRPO step."""
import os
import sys
from pathlib import Path

import torch
import torch.distributed as td

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def fixed_trajectories():
    """Two groups of four hand-made trajectories with mixed rewards and lengths (no sampling)."""
    from buffers import Trajectory

    trajs = []
    for i in range(8):
        n = 3 + (i * 5) % 7
        ids = [(7 * i + 3 * j) % 90 + 3 for j in range(n)]
        trajs.append(Trajectory([1, 5, 9 + i % 3], ids, [-2.0 - 0.1 * j for j in range(n)], [1] * n,
                                reward=float((i * 3) % 4 == 0), group_id=i // 4))
    return trajs


def build_algorithm(output_dir: str):
    from algorithms import GRPO, GRPOConfig
    from envs import make
    from policies import HFPolicy, build_tiny_model, build_tiny_tokenizer
    from tests.toy_env import DigitsEnv  # noqa: F401

    tok = build_tiny_tokenizer()
    policy = HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")
    config = GRPOConfig(kl_coeff=0.0, learning_rate=1e-2, micro_batch_size=2, output_dir=output_dir, progress=False,
                        samples_per_prompt=4, prompts_per_iteration=2)
    return GRPO(policy, make("ToyDigits-v0"), config)


def one_step(trajectories, output_dir: str):
    algo = build_algorithm(output_dir)
    algo.prepare(trajectories)
    algo.update_step(trajectories)
    return {n: p.detach().clone() for n, p in algo.policy.model.named_parameters()}


def run(rank: int, world: int, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    td.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    mine = [t for t in fixed_trajectories() if t.group_id == rank]  # each rank holds whole groups
    params = one_step(mine, out_dir)
    torch.save(params, Path(out_dir) / f"rank{rank}.pt")
    td.destroy_process_group()
