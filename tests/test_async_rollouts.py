"""Rollout workers (`rollout_workers: 1`) on two gloo ranks: rank 1 samples, rank 0 trains (async_rollouts_worker.py).

With max_policy_lag 0 the run is the colocated one, row for row and weight for weight (the same seeds, the same
keyed sampling noise, the weights broadcast exactly); with lag 1 each batch is sampled by the version before and
the rollout rank holds the trainer's weights of the version it last took; trajectories that lag too far are
dropped and counted, and the lag is corrected with replay's truncated importance weights."""
import math

import pytest
import torch

from tests.async_rollouts_worker import ITERATIONS, async_runs, colocated, stale_batches
from tests.two_ranks import Job

TWO_RANK_JOBS = (Job("async_runs", async_runs), Job("async_stale", stale_batches))  # tests/two_ranks.py


@pytest.fixture(scope="module")
def runs(two_rank_jobs):
    return two_rank_jobs.folder("async_runs")


def load(folder, name):
    return [torch.load(folder / f"{name}_rank{r}.pt", weights_only=False) for r in (0, 1)]


def test_lag_zero_equals_the_colocated_run(runs, tmp_path):
    trainer, worker = load(runs, "lag0")
    rows = colocated(str(tmp_path))
    assert not trainer["rollout"] and worker["rollout"]
    assert trainer["rows"] == worker["rows"]  # every rank returns the run's rows
    assert len(rows) == len(trainer["rows"]) == ITERATIONS
    for mine, theirs in zip(trainer["rows"], rows):
        for key in ("reward_mean", "completion_length", "loss", "grad_norm"):
            assert math.isclose(mine[key], theirs[key], rel_tol=1e-6, abs_tol=1e-7), key
        assert mine["policy_lag"] == 0 and mine["dropped_stale_trajectories"] == 0
    single = torch.load(tmp_path / "colocated.pt", weights_only=False)["params"]
    for name, value in single.items():
        assert torch.allclose(trainer["params"][name], value, atol=1e-4), name  # threads: 1 there, more here
    assert worker["versions"] == [(b, [b]) for b in range(ITERATIONS)]  # batch b sampled by version b


def test_lag_one_samples_each_batch_with_the_version_before(runs):
    trainer, worker = load(runs, "lag1_lora")
    assert worker["versions"] == [(0, [0]), (1, [0]), (2, [1])]
    assert [row["policy_lag"] for row in trainer["rows"]] == [0, 1, 1]
    assert all(row["dropped_stale_trajectories"] == 0 for row in trainer["rows"])
    # the last version published is the weights after iteration 1 (batch 2's): the rollout rank holds them all
    held, sent = worker["params"], trainer["after"][ITERATIONS - 2]
    assert set(held) == set(sent)
    for name, value in sent.items():
        assert torch.equal(held[name], value), name
    assert any(not torch.equal(trainer["params"][n], v) for n, v in held.items() if "lora" in n)  # it moved on


def test_lag_one_learns_what_the_trainer_logs(runs):
    trainer, _ = load(runs, "lag1_lora")
    for row in trainer["rows"]:
        assert math.isfinite(row["loss"]) and row["trained_trajectories"] == 8
        assert row["time_wait"] >= 0 and row["tokens_per_second"] > 0


def test_stale_trajectories_are_dropped_and_the_lag_weighted(two_rank_jobs):
    found = torch.load(two_rank_jobs.folder("async_stale") / "stale.pt", weights_only=False)
    assert found["versions"] == [3, 2]  # version 1 is 2 behind iteration 3: dropped
    assert found["metrics"] == {"policy_lag": 0.5, "dropped_stale_trajectories": 1}
    assert found["seconds"] == 0.25
    # -w * log pi * A, A = [1, 2]; w = 1 on the fresh row, min(pi / mu, 1) on the lagging one: 0.25/0.5, 0.8/0.4 -> 1
    expected = torch.tensor([[0.5, 2.0], [-0.5 * math.log(0.25), -1.0 * math.log(0.8) * 2]])
    assert torch.allclose(found["policy"], expected, atol=1e-6)


def test_a_run_stopped_early_drains_the_batches_sampled_ahead(runs):
    trainer, worker = load(runs, "stop")
    assert [row["iteration"] for row in trainer["rows"]] == [1] and worker["rows"] == trainer["rows"]
    assert worker["versions"] == [(0, [0]), (1, [0]), (2, [1])]  # batches 1 and 2 were sampled, then discarded


def test_the_schedule_every_rank_computes():
    from lmgym.training.rollout_workers.roles import drain_batches, group_slice, needed_version, publishes

    assert [needed_version(b, 0, 1) for b in range(4)] == [0, 0, 1, 2]
    assert [needed_version(b, 5, 2) for b in range(5, 9)] == [5, 5, 5, 6]  # resumed at 5: from the checkpoint's
    assert [publishes(k, 4, 1) for k in range(4)] == [True, True, False, False]  # batch 3 needs version 2 at most
    assert list(drain_batches(4, 0, 4, 1)) == [] and list(drain_batches(2, 0, 6, 1)) == [2, 3]
    assert list(drain_batches(1, 0, 3, 1)) == [1, 2] and list(drain_batches(1, 0, 3, 0)) == [1]
    assert group_slice(8, 2, 1) == (4, 8)
    with pytest.raises(ValueError, match="do not split evenly"):
        group_slice(6, 4, 0)


def test_within_lag_keeps_the_recent_and_counts_the_rest():
    from lmgym.algorithms.async_rollouts import within_lag
    from lmgym.buffers import Trajectory

    made = [Trajectory([1], [2], [0.0], [1], reward=0.0, iteration=v) for v in (5, 4, 3, 2)]
    kept, dropped = within_lag(made, 5, 2)
    assert [t.iteration for t in kept] == [5, 4, 3] and dropped == 1


def test_bad_settings_are_one_line(tiny_policy):
    from lmgym.algorithms import GRPO, GRPOConfig, MCTSSearch, MCTSSearchConfig, RLAlgorithm
    from lmgym.algorithms.async_rollouts import check_async
    from lmgym.envs import make
    from lmgym.training import ConfigError
    from lmgym.training.rollout_workers.roles import Roles, check_launch

    with pytest.raises(ValueError, match=r"^rollout_workers=1 needs a torchrun launch") as err:
        GRPO(tiny_policy, make("Arithmetic-v0", level=0), GRPOConfig(rollout_workers=1))
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=r"rollout_workers=2 leaves no trainer among the 2 ranks"):
        check_launch(2, True, 2)
    with pytest.raises(ConfigError, match="rollout_workers"):
        GRPOConfig(rollout_workers=-1)

    def algorithm(config, collect=RLAlgorithm.collect):  # what check_async reads: the config, whose collect()
        return type("Algorithm", (), {"collect": collect, "config": config})()

    roles = Roles(rank=0, world=3, rollout_workers=1)
    cases = [(GRPOConfig(data_parallel="fsdp"), "data_parallel ddp or allreduce"),
             (GRPOConfig(replay_iterations=1), "replay_iterations needs rollout_workers 0"),
             (GRPOConfig(prompts_per_iteration=3), "divisible by the trainer ranks \\(2\\)")]
    for config, message in cases:
        with pytest.raises(ConfigError, match=message):
            check_async(algorithm(config), roles)
    check_async(algorithm(GRPOConfig()), roles)  # the defaults are fine
    with pytest.raises(ConfigError, match="overrides collect"):
        check_async(algorithm(MCTSSearchConfig(), MCTSSearch.collect), roles)
