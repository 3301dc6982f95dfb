"""Jobs for tests/test_async_rollouts.py: one gloo rank each of a run with `rollout_workers` (rank 1 samples,
rank 0 trains), on the tiny model and the ToyDigits env. Each saves what the test compares under its folder."""
import os
import sys
from contextlib import contextmanager
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lmgym.training import distributed as dist  # noqa: E402
from tests.distributed_worker import join_gloo  # noqa: E402

ITERATIONS = 3


@contextmanager
def launched(rank: int, world: int):
    """RANK and WORLD_SIZE set as torchrun sets them (what rollout_workers checks), then as they were."""
    before = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE")}
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world))
    try:
        yield
    finally:
        for key, value in before.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)


def build(output_dir: str, algorithm: str = "grpo", lora: bool = False, **settings):
    """GRPO (or REINFORCE-stable) on ToyDigits with the tiny model, built the same way on every rank."""
    from lmgym.algorithms import GRPO, GRPOConfig, ReinforceStable, ReinforceStableConfig
    from lmgym.envs import make
    from lmgym.policies import HFPolicy, LoraSettings, build_tiny_model, build_tiny_tokenizer
    from tests.toy_env import DigitsEnv  # noqa: F401

    tok = build_tiny_tokenizer()
    model = build_tiny_model(tok, seed=0)
    torch.manual_seed(1)  # the LoRA A matrices
    policy = HFPolicy(model, tok, device="cpu", lora=LoraSettings(r=4, alpha=8) if lora else None)
    common = dict(train_iterations=ITERATIONS, prompts_per_iteration=2, max_new_tokens=4, micro_batch_size=4,
                  learning_rate=5e-2, save_every=10**6, eval_at_start=False, progress=False, output_dir=output_dir,
                  data_parallel="allreduce")
    if algorithm == "reinforce":
        return ReinforceStable(policy, make("ToyDigits-v0"), ReinforceStableConfig(**common, kl_coeff=0.0,
                                                                                   **settings))
    return GRPO(policy, make("ToyDigits-v0"), GRPOConfig(**common, samples_per_prompt=4, **settings))


def snapshot(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def colocated(out_dir: str, **settings) -> list[dict]:
    """One process, every batch sampled and trained in turn (the default)."""
    algo = build(out_dir, **settings)
    rows = algo.train()
    torch.save({"rows": rows, "params": snapshot(algo.policy.model)}, Path(out_dir) / "colocated.pt")
    return rows


def run_async(rank: int, world: int, port: int, out_dir: str, name: str, stop_after: int = 0, **settings) -> None:
    """A run with rank 1 (of 2) as rollout worker; the trainer records its weights after each iteration (and stops
    after `stop_after` iterations when > 0, as a callback's `should_stop` does), the rollout rank the policy
    versions it sampled each batch with and its weights at the end."""
    from lmgym.training.callbacks import TrainerCallback

    algo = build(str(Path(out_dir) / name), rollout_workers=1, **settings)
    after: dict[int, dict] = {}

    class Weights(TrainerCallback):
        def on_iteration_end(self, trainer, metrics):
            after[trainer.iteration] = snapshot(trainer.policy.model)
            trainer.should_stop = trainer.iteration == stop_after

    sampled: list[tuple[int, int]] = []  # (batch, version of its trajectories)
    if algo.rollout_rank:
        sample_groups = algo.sample_groups

        def recording(*args, **kwargs):
            out = sample_groups(*args, **kwargs)
            sampled.append((algo.iteration, out))
            return out
        algo.sample_groups = recording
    else:
        algo.callbacks.add(Weights())
    rows = algo.train()
    found = {"rows": rows, "params": snapshot(algo.policy.model), "rollout": algo.rollout_rank}
    if algo.rollout_rank:
        found["versions"] = [(batch, sorted({t.iteration for t in trajs})) for batch, trajs in sampled]
    else:
        found["after"] = after
    torch.save(found, Path(out_dir) / f"{name}_rank{rank}.pt")


def async_runs(rank: int, world: int, port: int, out_dir: str) -> None:
    """1 rollout rank + 1 trainer: lag 0 (what a colocated run does, in turn), lag 1 with LoRA, and lag 1 stopped
    by a callback after the first iteration (the batches sampled past it drained)."""
    join_gloo(rank, world, port)
    with launched(rank, world):
        run_async(rank, world, port, out_dir, "lag0", max_policy_lag=0)
        run_async(rank, world, port, out_dir, "lag1_lora", max_policy_lag=1, lora=True)
        run_async(rank, world, port, out_dir, "stop", stop_after=1, max_policy_lag=1)
    dist.destroy()


def stale_batches(rank: int, world: int, port: int, out_dir: str) -> None:
    """Rank 1 sends hand-made trajectories tagged with policy versions 3, 2 and 1 as batch 3; the trainer, at
    iteration 3 with max_policy_lag 1, keeps the first two and counts the third, and saves REINFORCE-stable's loss
    terms for hand-set current log-probs."""
    import math

    from lmgym.buffers import ADVANTAGES, Trajectory, collate
    from lmgym.training.rollout_workers.transport import Batch, TrajectorySender
    from lmgym.training.rollout_workers.weights import FULL, receive_weights

    join_gloo(rank, world, port)
    with launched(rank, world):
        algo = build(str(Path(out_dir) / "run"), algorithm="reinforce", rollout_workers=1, max_policy_lag=1)
        if algo.rollout_rank:
            behaviour = {3: [-0.5, -1.0], 2: [math.log(0.5), math.log(0.4)], 1: [-0.3, -0.3]}
            made = [Trajectory([1, 5], [7, 8], behaviour[v], [1, 1], reward=1.0, iteration=v, group_id=6 + i)
                    for i, v in enumerate((3, 2, 1))]
            start = receive_weights(algo.rollouts.roles.weights_group, list(algo.policy.model.parameters()), [])
            assert start.kind == FULL and start.version == 3, start  # the trainer's start, at its first batch
            sender = TrajectorySender(algo.rollouts.roles.transport_group)
            sender.send(0, Batch(3, made, 0.25))
            sender.wait()
        else:
            algo.iteration = 3
            kept = algo.collect()
            for t in kept:
                ADVANTAGES.set(t, [1.0, 2.0])
            current = torch.tensor([[-0.5, -1.0], [math.log(0.25), math.log(0.8)]])  # the policy now, hand-set
            terms = algo.loss(collate(kept, algo.pad_id, "cpu"), current, torch.zeros_like(current))
            torch.save({"versions": [t.iteration for t in kept], "metrics": algo.rollouts.metrics,
                        "policy": terms["policy"], "seconds": algo.rollouts.sample_seconds},
                       Path(out_dir) / "stale.pt")
    dist.destroy()
