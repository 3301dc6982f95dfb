"""`max_tokens_per_microbatch` over two CPU processes (gloo): ranks whose episodes need different numbers of
micro-batches (one short group, one long) finish their steps (DDP: still one all-reducing backward each;
FSDP: as many micro-batches on both), with the parameters of one process stepping on every group."""
import pytest
import torch

from tests.token_budget_worker import CASES, one_process, run
from tests.two_ranks import Job

# run in the session's one two-rank launch (tests/two_ranks.py), which stops a job that deadlocks (a rank
# waiting for a micro-batch the other never runs: its ranks sit idle) and fails its tests instead of waiting
TWO_RANK_JOBS = (Job("token_budget", run),)


@pytest.fixture(scope="module")
def two_ranks(two_rank_jobs):
    return two_rank_jobs.folder("token_budget")


@pytest.mark.parametrize("name,data_parallel,variant", CASES)
def test_ranks_with_different_micro_batch_counts(two_ranks, tmp_path, name, data_parallel, variant):
    rank0, rank1 = (torch.load(two_ranks / f"{name}_rank{r}.pt") for r in (0, 1))
    if data_parallel == "ddp":  # passes: reference, then two updates; rank 0's short group fits one micro-batch
        assert rank0["passes"] == [1, 1, 1] and rank1["passes"] == [4, 4, 4]
        assert rank0["synced_backwards"] == rank1["synced_backwards"] == 2  # one all-reducing backward per step
    else:  # FSDP gathers the layers in every forward: rank 0 splits its micro-batch to run four too
        assert rank0["passes"] == rank1["passes"] == [4, 4, 4]
    single = one_process(str(tmp_path / "single"), variant)
    assert set(single) == set(rank0["params"])
    # Adam's second step divides each gradient entry by its own running size, which magnifies summation order:
    # in ONE process, single-episode micro-batches against micro-batches of 2 already move one near-zero-gradient
    # lora_B entry by 3e-5 (0.3% of a 1e-2 step); a wrong step would move most entries by ~1e-2
    atol = 5e-5 if variant == "lora_kl" else 1e-5
    for n, value in single.items():
        assert torch.equal(rank0["params"][n], rank1["params"][n]), n  # ranks stay in sync
        assert torch.allclose(rank0["params"][n], value, atol=atol, rtol=1e-4), n  # the steps of one process


def test_fsdp_refuses_on_every_rank_when_a_rank_holds_too_few_episodes(two_ranks):
    messages = [(two_ranks / f"refusal_rank{r}.txt").read_text() for r in (0, 1)]
    assert messages[0] == messages[1] == (
        "max_tokens_per_microbatch: under FSDP every rank must run the same number of micro-batches, here 4, "
        "but a rank holds only 2 items; raise max_tokens_per_microbatch")
