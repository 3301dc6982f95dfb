"""FSDP2 as the data-parallel path (TrainerConfig.data_parallel="fsdp"): two CPU processes (gloo) taking one
GRPO step on half the groups each end with the parameters of one process on all of them (full fine-tuning
with the tied head, LoRA, with a KL reference: a frozen copy made before sharding, and LoRA with the KL to
the adapter-free model), the decoder layers are sharded while the tied embedding/head stays whole, and
sampling on the sharded model equals sampling on the whole one; with `fsdp_reshard_after_forward=False` the
layers stay gathered between a step's micro-batches, with the same result."""
import functools

import pytest
import torch

from tests.distributed_worker import (
    SAMPLE_PROMPTS,
    build_algorithm,
    foreach_run,
    ranks_and_one_process,
    resync_run,
    run,
    whiten_run,
)
from tests.two_ranks import Job

CASES = (("fsdp_full", "fsdp", "full"), ("fsdp_lora", "fsdp", "lora"), ("fsdp_kl", "fsdp", "kl"),
         ("fsdp_lora_kl", "fsdp", "lora_kl"), ("fsdp_keep", "fsdp", "keep"), ("fsdp_compiled", "fsdp", "compiled"))
# run in the session's one launch of two gloo processes (tests/two_ranks.py); foreach on one rank of its own
TWO_RANK_JOBS = (Job("fsdp", functools.partial(run, cases=CASES)), Job("fsdp_resync", resync_run),
                 Job("fsdp_foreach", foreach_run, world=1), Job("fsdp_whiten", whiten_run))


@pytest.fixture(scope="module")
def two_ranks(two_rank_jobs):
    return two_rank_jobs.folder("fsdp")


@pytest.mark.parametrize("name,variant", [(name, variant) for name, _, variant in CASES])
def test_fsdp_two_ranks_match_one_process(two_ranks, tmp_path, name, variant):
    # one process, no FSDP, eager: the compiled case is the "kl" case compiled, and its sharded, compiled layers
    # must step as the whole, eager model does (tests/test_compile_training.py: compiled == eager in one process)
    eager = "kl" if variant == "compiled" else variant
    rank0, rank1, single = ranks_and_one_process(two_ranks, tmp_path, name, "fsdp", eager)
    start_policy = build_algorithm(str(tmp_path / "start"), "fsdp", eager).policy
    start = dict(start_policy.model.named_parameters())
    assert sum(not torch.equal(start[n], v) for n, v in single.items()) > len(single) // 2  # the step moved them
    # LoRA with the KL (the adapter switched off for the reference, a sharded forward too): one lora_A entry
    # whose gradient is near zero lands 4e-6 (0.04% of the 1e-2 step) from one process's, as under DDP
    # exactly; Adam's first step divides each gradient entry by its own size, which magnifies sum order
    atol = 1e-5 if variant == "lora_kl" else 1e-6
    for n, value in single.items():
        assert torch.equal(rank0["params"][n], rank1["params"][n]), n  # gathered: both ranks hold the same
        assert torch.allclose(rank0["params"][n], value, atol=atol, rtol=1e-5), n  # same step as one process
    outside = [n for n in rank0["sharded"] if "layers." not in n]
    assert rank0["sharded"] and len(outside) == 1 and outside[0].endswith("model.norm.weight")  # layers, final norm
    assert not any("embed_tokens" in n for n in rank0["sharded"])  # ... the tied embedding/head is not
    if variant != "compiled":  # (tests/distributed_worker.py: record_sharding)
        whole_samples = start_policy.generate_text(SAMPLE_PROMPTS, max_new_tokens=6)
        assert rank0["samples"] == rank1["samples"] == whole_samples  # sampling on the sharded model: whole weights
    # each rank's 4 trajectories in micro-batches of 2: the second forward finds the layer sharded again,
    # unless fsdp_reshard_after_forward=False kept it gathered; after the step it is sharded either way
    # torch_compile=True: the sharded layers are compiled (before sharding) and so is the whole reference copy
    assert rank0["compiled"][0] == (variant == "compiled")
    assert variant != "compiled" or rank0["compiled"] == [True, True]
    kept = variant == "keep"
    assert rank0["sharded_at_training_forwards"] == [True, not kept], rank0["sharded_at_training_forwards"]
    assert rank0["sharded_after_step"] == rank0["sharded"]


def test_reinforce_stable_under_lora_resyncs_its_reference_adapter_under_fsdp(two_rank_jobs, tmp_path):
    """The reference adapter is added before sharding (B zero: the base until the first sync) and synced
    shard by shard: the KL pattern of one process (0, then > 0, then ~0 right after the sync), and the same
    parameters as one process."""
    resync_run(0, 1, 0, str(tmp_path))
    two = torch.load(two_rank_jobs.folder("fsdp_resync") / "resync_world2.pt")
    one = torch.load(tmp_path / "resync_world1.pt")
    assert two["kl"][1] == 0.0 and two["kl"][2] > 1e-4 and abs(two["kl"][3]) < 1e-6
    assert set(two["params"]) == set(one["params"]) and any("reference" in n for n in two["params"])
    for n, value in one["params"].items():
        assert torch.allclose(two["params"][n], value, atol=1e-5, rtol=1e-4), n


def test_adamw_never_runs_multi_tensor_kernels_over_mixed_shards_and_whole_tensors(two_rank_jobs):
    """On CUDA torch's AdamW defaults to foreach, which refuses FSDP shards beside the whole embedding (the
    first H100 run of W1 under fsdp failed so); `optimizer_foreach` turns it off there (CPU shows the same).
    One rank in a group of its own (`foreach_run`'s world of 1)."""
    out = two_rank_jobs.folder("fsdp_foreach")
    assert (out / "foreach.txt").read_text().splitlines() == ["foreach True mixed", "foreach False ok"]


def test_optimizer_foreach_is_torchs_default_without_shards():
    from lmgym.training.fsdp import optimizer_foreach

    assert optimizer_foreach([{"params": [torch.nn.Parameter(torch.zeros(2))]}]) is None


def test_batch_statistics_span_every_ranks_share(two_rank_jobs):
    """PPO's whitening, MCTSSearch's RMS scaling (and REINFORCE-stable's baseline and std, in the re-sync test
    above) use the whole iteration's batch: two ranks scaling their halves give one process's scaled batch."""
    from lmgym.algorithms.advantages import rms_scale, whiten
    from tests.distributed_worker import whiten_batch

    out = two_rank_jobs.folder("fsdp_whiten")
    values, mask = whiten_batch()
    for name, scale in (("whiten", whiten), ("rms", rms_scale)):
        halves = [torch.load(out / f"{name}_rank{r}.pt") for r in (0, 1)]
        assert torch.allclose(torch.cat(halves), scale(values, mask), atol=1e-6), name
        assert not torch.allclose(halves[0], scale(values[:3], mask[:3]), atol=1e-3), name  # not each half alone

