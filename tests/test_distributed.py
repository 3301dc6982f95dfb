"""Two CPU processes (gloo) taking one GRPO step on half the groups each == one process on all of them."""
import torch

from tests.distributed_worker import fixed_trajectories, one_step, run
from tests.two_ranks import Job

TWO_RANK_JOBS = (Job("allreduce", run),)  # run in the session's one two-rank launch (tests/two_ranks.py)


def test_two_ranks_match_one_process(two_rank_jobs, tmp_path):
    out = two_rank_jobs.folder("allreduce")
    rank0 = torch.load(out / "rank0.pt")
    rank1 = torch.load(out / "rank1.pt")
    single = one_step(fixed_trajectories(), str(tmp_path / "single"))
    for name, value in single.items():
        assert torch.equal(rank0[name], rank1[name]), name  # ranks stay in sync
        assert torch.allclose(rank0[name], value, atol=1e-6, rtol=1e-5), name  # same step as one process


def test_groups_sample_the_same_alone_or_batched(tiny_policy):
    """What torchrun sharding relies on: with a sample key, a group's episodes do not depend on the other
    groups in its batch (two half-batches == one batch), while another key samples something else."""
    from lmgym.envs import make
    from lmgym.episodes.rollout import SamplingSettings, rollout

    env = make("Arithmetic-v0", level=0, split="train")
    starts, settings = [{"seed": s} for s in range(4)], SamplingSettings(max_new_tokens=8, temperature=1.0)
    whole = rollout(env, tiny_policy, starts, 3, settings, sample_key=7)
    halves = (rollout(env, tiny_policy, starts[:2], 3, settings, sample_key=7)
              + rollout(env, tiny_policy, starts[2:], 3, settings, first_group_id=2, sample_key=7))
    assert [t.completion_ids for t in whole] == [t.completion_ids for t in halves]
    assert [t.group_id for t in whole] == [t.group_id for t in halves]
    for a, b in zip(whole, halves):
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5)
    other = rollout(env, tiny_policy, starts, 3, settings, sample_key=8)
    assert [t.completion_ids for t in other] != [t.completion_ids for t in whole]
