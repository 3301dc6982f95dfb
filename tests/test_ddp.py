"""torch DDP as the data-parallel path (TrainerConfig.data_parallel="ddp"): two CPU processes (gloo) taking
one GRPO step on half the groups each end with the parameters of one process on all of them, for full
fine-tuning (tied or untied lm-head: the untied head is averaged outside DDP) and LoRA, and DDP
all-reduces in the step's last micro-batch only (`no_sync` before it)."""
import functools

import pytest
import torch

from lmgym.algorithms import GRPOConfig
from lmgym.training.config import ConfigError
from tests.distributed_worker import build_algorithm, ranks_and_one_process, run
from tests.two_ranks import Job

CASES = (("ddp_full", "ddp", "full"), ("ddp_lora", "ddp", "lora"), ("ddp_untied", "ddp", "untied"))
TWO_RANK_JOBS = (Job("ddp", functools.partial(run, cases=CASES)),)  # the session's one launch (tests/two_ranks.py)


@pytest.fixture(scope="module")
def two_ranks(two_rank_jobs):
    return two_rank_jobs.folder("ddp")


@pytest.mark.parametrize("name,variant", [(name, variant) for name, _, variant in CASES])
def test_ddp_two_ranks_match_one_process(two_ranks, tmp_path, name, variant):
    rank0, rank1, single = ranks_and_one_process(two_ranks, tmp_path, name, "ddp", variant)  # one: no DDP
    assert all("lora_" in n for n in single) == (variant == "lora")
    assert ("lm_head.weight" in single) == (variant == "untied")
    start = dict(build_algorithm(str(tmp_path / "start"), "ddp", variant).policy.model.named_parameters())
    assert sum(not torch.equal(start[n], v) for n, v in single.items()) > len(single) // 2  # the step moved them
    for n, value in single.items():
        assert torch.equal(rank0["params"][n], rank1["params"][n]), n  # ranks stay in sync
        assert torch.allclose(rank0["params"][n], value, atol=1e-6, rtol=1e-5), n  # same step as one process
    # 4 trajectories per rank in micro-batches of 2: one backward of the two all-reduced (no_sync before it)
    assert rank0["synced_backwards"] == rank1["synced_backwards"] == 1


def test_data_parallel_bad_value_is_one_line():
    with pytest.raises(ConfigError, match=r"^GRPOConfig\.data_parallel must be ddp, fsdp or allreduce, got 'zero'$"):
        GRPOConfig(data_parallel="zero")
