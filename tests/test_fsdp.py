"""FSDP2 as the data-parallel path (TrainerConfig.data_parallel="fsdp"): two CPU processes (gloo) taking one
GRPO step on half the groups each end with the parameters of one process on all of them (full fine-tuning
with the tied head, LoRA, with a KL reference: a frozen copy made before sharding, and LoRA with the KL to
the adapter-free model), the decoder layers are sharded while the tied embedding/head stays whole, and
sampling on the sharded model equals sampling on the whole one."""
import pytest
import torch

from tests.distributed_worker import (
    SAMPLE_PROMPTS, build_algorithm, ranks_and_one_process, two_rank_step,
)
from tests.test_distributed import free_port

CASES = (("fsdp_full", "fsdp", "full"), ("fsdp_lora", "fsdp", "lora"), ("fsdp_kl", "fsdp", "kl"),
         ("fsdp_lora_kl", "fsdp", "lora_kl"))


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    return two_rank_step(tmp_path_factory.mktemp("fsdp"), CASES)


@pytest.mark.parametrize("name,variant", [(name, variant) for name, _, variant in CASES])
def test_fsdp_two_ranks_match_one_process(two_ranks, tmp_path, name, variant):
    rank0, rank1, single = ranks_and_one_process(two_ranks, tmp_path, name, "fsdp", variant)  # one: no FSDP
    start_policy = build_algorithm(str(tmp_path / "start"), "fsdp", variant).policy
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
    whole_samples = start_policy.generate_text(SAMPLE_PROMPTS, max_new_tokens=6)
    assert rank0["samples"] == rank1["samples"] == whole_samples  # sampling on the sharded model: whole weights


def test_a_lora_reference_resync_under_fsdp_is_refused_in_one_line(tmp_path, monkeypatch):
    from algorithms import distributed as dist

    monkeypatch.setattr(dist, "world_size", lambda: 2)  # what the check sees on 2 ranks (nothing sharded here)
    with pytest.raises(ValueError, match=r"^ref_sync_every > 0 with a LoRA policy is not supported under "
                                         r"data_parallel='fsdp' \(the reference adapter would be added to layers "
                                         r"already sharded\); use ref_sync_every=0, full fine-tuning, or "
                                         r"data_parallel='ddp'$"):
        build_algorithm(str(tmp_path), "fsdp", "lora", kl_coeff=0.1, ref_sync_every=1)
    build_algorithm(str(tmp_path), "ddp", "lora", kl_coeff=0.1, ref_sync_every=1)  # DDP re-syncs the adapter


FOREACH_WORKER = """
import os, sys, torch, torch.distributed as dist
sys.path.insert(0, {root!r})
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT={port!r})
dist.init_process_group("gloo", rank=0, world_size=1)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from algorithms.fsdp import optimizer_foreach
model = torch.nn.Sequential(torch.nn.Embedding(10, 4), torch.nn.Linear(4, 4))
fully_shard(model[1], mesh=init_device_mesh("cpu", (1,)))  # a shard beside a whole embedding, as FSDP here
for foreach in (True, optimizer_foreach([{{"params": list(model.parameters())}}])):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=foreach)
    model(torch.tensor([1, 2])).sum().backward()
    try:
        optimizer.step()
        print("foreach", foreach, "ok")
    except RuntimeError as err:
        print("foreach", foreach, "mixed" if "mixed" in str(err) else str(err))
dist.destroy_process_group()
"""


def test_adamw_never_runs_multi_tensor_kernels_over_mixed_shards_and_whole_tensors(tmp_path):
    """On CUDA torch's AdamW defaults to foreach, which refuses FSDP shards beside the whole embedding (the
    first H100 run of W1 under fsdp failed so); `optimizer_foreach` turns it off there (CPU shows the same)."""
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "foreach.py"
    script.write_text(FOREACH_WORKER.format(root=str(Path(__file__).resolve().parents[1]), port=str(free_port())))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines() == ["foreach True mixed", "foreach False ok"], done.stderr[-2000:]


def test_optimizer_foreach_is_torchs_default_without_shards():
    from algorithms.fsdp import optimizer_foreach

    assert optimizer_foreach([{"params": [torch.nn.Parameter(torch.zeros(2))]}]) is None
