"""Sharded checkpoints and the model folder under data_parallel="fsdp" (training/checkpoints/sharded.py), on
two CPU processes (gloo; tests/fsdp_checkpoint_worker.py): a run stopped after its first iteration and resumed
ends with the parameters and per-rank RNG states of an uninterrupted run (full fine-tuning, LoRA, and a KL
reference re-synced to the policy, which a sharded checkpoint restores from the loaded shards); the
checkpoint lists every rank's shards in its manifest; a single process, or two ranks given a 3-rank
checkpoint, refuse it in one line; an altered shard is caught, and so is a checkpoint that lost a rank's shard
(resuming takes the one before); and `save_model` writes the gathered weights as a folder transformers loads."""
import shutil

import pytest
import torch
from safetensors.torch import load_file

from lmgym.training.checkpoints.folders import CheckpointError, CorruptCheckpointError
from lmgym.training.checkpoints.trainer_state import write_model_folder
from tests import checkpoint_state
from tests.distributed_worker import build_algorithm
from tests.fsdp_checkpoint_worker import SETTINGS, VARIANTS, drop_shard, run
from tests.two_ranks import Job

CHECKPOINT = "checkpoint-1"
TWO_RANK_JOBS = (Job("fsdp_checkpoints", run),)  # run in the session's one two-rank launch (tests/two_ranks.py)


@pytest.fixture(scope="module")
def two_ranks(two_rank_jobs):
    return two_rank_jobs.folder("fsdp_checkpoints")


def results(out, variant):
    return [torch.load(out / f"{variant}_rank{r}.pt") for r in (0, 1)]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_resumed_fsdp_run_ends_as_an_uninterrupted_one(two_ranks, tmp_path, variant):
    ranks = results(two_ranks, variant)
    start = {n: p.detach() for n, p in build_algorithm(str(tmp_path), "fsdp", variant).policy.model.named_parameters()
             if p.requires_grad}
    straight = ranks[0]["straight"]
    assert set(straight) == set(start)
    assert sum(not torch.equal(start[n], v) for n, v in straight.items()) > len(start) // 2  # the run trained
    for r in ranks:
        assert r["resumed_from"] == 2
        for n, value in straight.items():
            assert torch.allclose(r["resumed"][n], value, atol=1e-6, rtol=1e-5), n
        for k, state in r["straight_rng"].items():  # each rank's own generators continue as if never stopped
            assert torch.equal(r["resumed_rng"][k], state), k
    assert not torch.equal(ranks[0]["straight_rng"]["torch"], ranks[1]["straight_rng"]["torch"])  # ranks differ


def test_a_sharded_checkpoint_holds_every_ranks_shards_in_its_manifest(two_ranks):
    import json

    folder = two_ranks / "full_resumed" / CHECKPOINT
    files = json.loads((folder / "MANIFEST.json").read_text())["files"]
    shards = {"sharded/.metadata", "sharded/__0_0.distcp", "sharded/__1_0.distcp"}  # both ranks' and DCP's index
    assert {"trainer_state.json", "scheduler.pt", "rng_state.pth", "extra_state.pt", "buffer.jsonl"} | shards \
        <= set(files)
    assert not {"model.safetensors", "optimizer.pt"} & set(files)
    state = checkpoint_state.read(folder)
    assert state["sharded"] == {"world_size": 2} and len(state["rank_rng"]) == 2
    assert "policy" not in state and "optimizer" not in state  # the weights are in sharded/, never rank 0's shard
    kl = checkpoint_state.read(two_ranks / "kl_resumed" / CHECKPOINT)
    assert kl["reference_source"] == "policy" and kl["reference"] is None  # restored from the loaded shards


def test_one_process_refuses_a_two_rank_sharded_checkpoint_in_one_line(two_ranks, tmp_path):
    run_dir = tmp_path / "run"
    shutil.copytree(two_ranks / "full_resumed", run_dir)
    algo = build_algorithm(str(run_dir), "fsdp", "full", **SETTINGS)  # one process: nothing sharded
    with pytest.raises(CheckpointError, match=r"a sharded checkpoint of 2 FSDP ranks, but this run has 1 process "
                                              r"without FSDP; resume it with data_parallel='fsdp' on 2 ranks") as err:
        algo.train(resume=True)
    assert "\n" not in str(err.value) and not isinstance(err.value, CorruptCheckpointError)
    assert (run_dir / "checkpoint-2").is_dir()  # refused, never set aside as corrupt
    assert algo.iteration == 0


def test_two_ranks_refuse_a_three_rank_checkpoint_in_one_line_on_every_rank(two_ranks):
    errors = [(two_ranks / f"wrong_world_rank{r}.txt").read_text() for r in (0, 1)]
    assert errors[0] == errors[1] and "\n" not in errors[0]  # rank 0 checks; rank 1 raises its error, not a hang
    assert errors[0].startswith("CheckpointError: ") and errors[0].endswith(
        "checkpoint-1: a sharded checkpoint of 3 FSDP ranks, but this run has 2 processes; resume it on 3 ranks "
        "(torchrun --nproc_per_node 3)")


def test_an_altered_shard_is_a_corrupt_checkpoint(two_ranks, tmp_path):
    folder = tmp_path / "checkpoint-1"
    shutil.copytree(two_ranks / "full_resumed" / CHECKPOINT, folder)
    shard = folder / "sharded" / "__1_0.distcp"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    algo = build_algorithm(str(tmp_path / "run"), "fsdp", "full")
    with pytest.raises(CorruptCheckpointError, match=r"__1_0\.distcp: sha256 differs from the manifest"):
        algo.load(folder)


def test_a_checkpoint_missing_a_ranks_shard_is_incomplete(two_ranks, tmp_path):
    from lmgym.training.checkpoints import sharded

    folder = tmp_path / "checkpoint-1"
    shutil.copytree(two_ranks / "full_resumed" / CHECKPOINT, folder)
    state = checkpoint_state.read(folder)
    sharded.check_complete(folder, state)  # as written: every rank's shard
    drop_shard(folder, 1)
    with pytest.raises(CorruptCheckpointError) as err:
        sharded.check_complete(folder, state)
    assert str(err.value) == (f"{folder}: incomplete sharded checkpoint: no shard file of rank 1 of its 2 (every "
                              f"rank's shards are part of a checkpoint)")


def test_resuming_sets_a_checkpoint_missing_a_shard_aside_and_takes_the_one_before(two_ranks):
    straight = results(two_ranks, "full")[0]["straight"]
    run_dir = two_ranks / "lost_shard"
    assert (run_dir / "corrupt-checkpoint-2" / "sharded" / "__0_0.distcp").is_file()  # set aside, kept
    assert (run_dir / "checkpoint-2" / "sharded" / "__1_0.distcp").is_file()  # written again from checkpoint-1
    for rank in (0, 1):
        found = torch.load(two_ranks / f"lost_shard_rank{rank}.pt")
        assert found["iteration"] == 2
        for name, value in straight.items():
            assert torch.allclose(found["resumed"][name], value, atol=1e-6, rtol=1e-5), name


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_fsdp_model_folder_holds_the_gathered_weights(two_ranks, tmp_path, variant):
    from transformers import AutoModelForCausalLM

    rank0, rank1 = results(two_ranks, variant)
    folder = two_ranks / f"{variant}_model"
    assert rank0["folder"] == str(folder) and rank1["folder"] is None
    gathered = rank0["gathered"]
    # what one process writes from the same weights
    policy = build_algorithm(str(tmp_path), "fsdp", variant).policy
    policy.model.load_state_dict(gathered, strict=False)
    assert all(torch.equal(p, gathered[n]) for n, p in policy.model.named_parameters())
    expected = write_model_folder(policy, tmp_path / "one_process", None)
    weights = load_file(folder / "model.safetensors")
    assert weights.keys() == load_file(expected / "model.safetensors").keys()
    for name, value in load_file(expected / "model.safetensors").items():
        assert torch.equal(weights[name], value), name
    loaded = dict(AutoModelForCausalLM.from_pretrained(folder).named_parameters())
    if variant != "lora":
        assert set(loaded) == set(gathered)
        for name, value in gathered.items():
            assert torch.equal(loaded[name], value), name
    else:
        adapter = load_file(folder / "adapter" / "adapter_model.safetensors")
        lora = {n.replace(".default", ""): v for n, v in gathered.items() if "lora_" in n}
        assert adapter.keys() == lora.keys() and all(torch.equal(adapter[n], v) for n, v in lora.items())
