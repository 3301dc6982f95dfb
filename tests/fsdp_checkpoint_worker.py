"""Worker for tests/test_fsdp_checkpoints.py: one rank of a 2-process gloo group under data_parallel="fsdp".

Per variant ("full" fine-tuning, "lora", "kl": full fine-tuning with a KL reference re-synced to the
policy every iteration, so the checkpoint's reference is its policy): a straight 2-iteration GRPO run;
the same run stopped after iteration 1 (its checkpoint written by both ranks) and resumed from it by a
freshly built algorithm; then the resumed run's model folder (`save_model` on both ranks); and the full
run's checkpoint, relabelled as one of 3 ranks, resumed on 2; and that run's two checkpoints with rank 1's shard
of the newest lost (`drop_shard`), resumed by a run of 2 iterations. Each rank first draws a rank-dependent
number of values from its random generators, so that the ranks' RNG states differ and a checkpoint that
restored rank 0's states everywhere would be caught. Writes `<variant>_rank<r>.pt`: the trainable
parameters of both runs, each rank's RNG states at the end of both, and every parameter the model folder
was written from (gathered); `wrong_world_rank<r>.txt`: the error each rank raised; `lost_shard_rank<r>.pt`: the
trainable parameters and iteration after the lost-shard resume."""
import gc
import shutil
import sys
from pathlib import Path

import torch
import torch.distributed as td

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.distributed_worker import build_algorithm, join_gloo, whole  # noqa: E402

VARIANTS = ("full", "lora", "kl")
SETTINGS = {"max_new_tokens": 6, "eval_at_start": False, "seed": 3}


def build(output_dir: Path, variant: str, iterations: int):
    """The algorithm under FSDP, its RNG states moved on by a rank-dependent number of draws."""
    resync = {"ref_sync_every": 1} if variant == "kl" else {}
    algo = build_algorithm(str(output_dir), "fsdp", variant, train_iterations=iterations, **resync, **SETTINGS)
    assert algo.gradients.mode == "fsdp", algo.gradients.mode
    draws = 1 + td.get_rank()
    torch.rand(draws)
    torch.rand(draws, generator=algo.generator)
    return algo


def trained(algo) -> dict[str, torch.Tensor]:
    return {n: whole(p) for n, p in algo.policy.model.named_parameters() if p.requires_grad}


def rng_states(algo) -> dict[str, torch.Tensor]:
    return {"torch": torch.get_rng_state(), "generator": algo.generator.get_state()}


def relabelled(source: Path, target: Path, world: int) -> None:
    """A copy of checkpoint folder `source` at `target` whose state (and manifest) claim `world` ranks."""
    from tests import checkpoint_state

    shutil.copytree(source, target)
    checkpoint_state.rewrite(target, lambda state: state["sharded"].update(world_size=world))


def wrong_world_error(out: Path) -> str:
    """The error of resuming, on these 2 ranks, the full run's first checkpoint relabelled as 3 ranks'."""
    from lmgym.training.checkpoints.folders import CheckpointError

    run_dir = out / "wrong_world"
    if td.get_rank() == 0:
        relabelled(out / "full_resumed" / "checkpoint-1", run_dir / "checkpoint-1", 3)
    td.barrier()
    algo = build(run_dir, "full", 2)
    try:
        algo.train(resume=True)
    except CheckpointError as err:
        return f"{type(err).__name__}: {err}"
    finally:  # free the sharded model before the group goes: gloo's teardown otherwise aborts now and then
        del algo
        gc.collect()
    return "resumed"


def drop_shard(folder: Path, rank: int) -> None:
    """Remove rank `rank`'s shard file from the sharded checkpoint `folder` and from its manifest (a copy or sync
    that lost the file: the manifest still verifies)."""
    import json

    name = f"sharded/__{rank}_0.distcp"
    (folder / name).unlink()
    manifest = json.loads((folder / "MANIFEST.json").read_text())
    del manifest["files"][name]
    (folder / "MANIFEST.json").write_text(json.dumps(manifest))


def lost_shard(out: Path) -> dict:
    """The full run's checkpoints 1 and 2, rank 1's shard of checkpoint-2 lost, resumed for 2 iterations."""
    run_dir = out / "lost_shard"
    if td.get_rank() == 0:
        shutil.copytree(out / "full_resumed", run_dir)
        drop_shard(run_dir / "checkpoint-2", 1)
    td.barrier()
    algo = build(run_dir, "full", 2)
    algo.train(resume=True)
    result = {"resumed": trained(algo), "iteration": algo.iteration}
    del algo
    gc.collect()
    return result


def run(rank: int, world: int, port: int, out_dir: str) -> None:
    join_gloo(rank, world, port)
    out = Path(out_dir)
    for variant in VARIANTS:
        straight = build(out / f"{variant}_straight", variant, 2)
        straight.train()
        stopped = build(out / f"{variant}_resumed", variant, 1)
        stopped.train()  # checkpoints/checkpoint-1, written by both ranks
        resumed = build(out / f"{variant}_resumed", variant, 2)
        resumed.train(resume=True)
        folder = resumed.save_model(out / f"{variant}_model")
        gathered = {n: whole(p) for n, p in resumed.policy.model.named_parameters()}
        torch.save({"straight": trained(straight), "resumed": trained(resumed), "resumed_from": resumed.iteration,
                    "straight_rng": rng_states(straight), "resumed_rng": rng_states(resumed),
                    "gathered": gathered, "folder": None if folder is None else str(folder)},
                   out / f"{variant}_rank{rank}.pt")
    (out / f"wrong_world_rank{rank}.txt").write_text(wrong_world_error(out))
    torch.save(lost_shard(out), out / f"lost_shard_rank{rank}.pt")
    td.destroy_process_group()
