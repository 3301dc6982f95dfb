"""Which ranks train and which run rollouts, and the process groups between them.

Of the WORLD ranks torchrun starts, the first T = WORLD - R train (trainer rank 0 is global rank 0: it logs,
evaluates and writes the run folder) and the last R run the episode engine. `split_ranks` makes, on every rank and
in the same order (torch.distributed requires it): the trainers' group, over which `training.distributed` then
works (gradient averaging, metrics), a group of one for each rollout rank (its own helpers are single-process),
the weights group (trainer rank 0 and the rollout ranks: versioned weights, broadcast) and a gloo group of every
rank for the trajectories (pickled, point to point; gloo even when NCCL carries the weights).

The schedule: which groups each rank handles and which weights sample which batch, the same arithmetic on every
rank, so no message is needed to agree on it.

Batch b (the one the trainers train on at iteration b) is sampled with policy version `needed_version(b)`:
`max_policy_lag` versions behind, or the version the run started from. Version v is the policy after v iterations
(the trainers' weights as iteration v begins); trainer rank 0 publishes version k + 1 after iteration k's update
when a batch still needs it (`publishes`). A run that stops early (a callback's `should_stop`) leaves the batches
of `drain_batches` sampled but untrained: the trainers receive and discard them, so no send is left waiting."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch.distributed as td

from lmgym.training import distributed as dist


@dataclass(frozen=True)
class Roles:
    """This rank's role in a run with `rollout_workers` ranks apart, and the groups between roles."""

    rank: int          # global rank
    world: int         # every rank torchrun started
    rollout_workers: int
    own_group: Any = None         # the trainers' group on a trainer rank; a group of one on a rollout rank
    weights_group: Any = None     # trainer rank 0 and the rollout ranks
    transport_group: Any = None   # every rank, gloo

    @property
    def trainers(self) -> int:
        return self.world - self.rollout_workers

    @property
    def is_rollout(self) -> bool:
        return self.rank >= self.trainers

    @property
    def rollout_ranks(self) -> list[int]:
        return list(range(self.trainers, self.world))

    @property
    def trainer_ranks(self) -> list[int]:
        return list(range(self.trainers))

    @property
    def worker_index(self) -> int:
        """0..R-1 on a rollout rank."""
        return self.rank - self.trainers


_SPLIT: list = []  # [(the default process group, Roles)]: a second trainer built in one launch reuses the groups


def check_launch(rollout_workers: int, launched: bool, world: int) -> None:
    """A one-line ValueError for a launch that cannot hold `rollout_workers` rollout ranks and a trainer."""
    if rollout_workers < 0:
        raise ValueError(f"rollout_workers must be an integer >= 0, got {rollout_workers}")
    if rollout_workers and not launched:
        raise ValueError(f"rollout_workers={rollout_workers} needs a torchrun launch of rollout_workers + trainer "
                         f"processes (e.g. torchrun --nproc_per_node {rollout_workers + 1}); this is a single process")
    if rollout_workers >= world:
        raise ValueError(f"rollout_workers={rollout_workers} leaves no trainer among the {world} ranks torchrun "
                         f"started: launch more than {rollout_workers} processes")


def split_ranks(rollout_workers: int) -> Roles | None:
    """The roles of a launch with `rollout_workers` ranks apart (None when 0: every rank samples and trains), its
    groups made and `training.distributed` set to work over this rank's side. Call after `dist.init_from_env()`."""
    check_launch(rollout_workers, dist.launched() and dist.is_initialized(),
                 td.get_world_size() if dist.is_initialized() else 1)
    if not rollout_workers:
        return None
    world, default = td.get_world_size(), td.group.WORLD
    if _SPLIT and _SPLIT[0][0] is default and _SPLIT[0][1].rollout_workers == rollout_workers:
        roles = _SPLIT[0][1]
    else:
        trainers = world - rollout_workers
        trainer_group = td.new_group(list(range(trainers)))
        solo = {r: td.new_group([r]) for r in range(trainers, world)}
        weights_group = td.new_group([0, *range(trainers, world)])
        transport_group = td.new_group(list(range(world)), backend="gloo")
        rank = td.get_rank()
        roles = Roles(rank, world, rollout_workers, solo.get(rank, trainer_group), weights_group, transport_group)
        _SPLIT[:] = [(default, roles)]
    dist.use_group(roles.own_group, main=not roles.is_rollout)
    return roles


# ------------------------------------------------------------------ the schedule
def group_slice(count: int, parts: int, index: int) -> tuple[int, int]:
    """[start, stop) of part `index` when `count` groups are split into `parts` equal consecutive parts."""
    if count % parts:
        raise ValueError(f"{count} groups do not split evenly into {parts} parts")
    share = count // parts
    return index * share, (index + 1) * share


def needed_version(batch: int, start: int, lag: int) -> int:
    """The policy version that samples `batch` in a run started (or resumed) at iteration `start`."""
    return max(start, batch - lag)


def publishes(iteration: int, train_iterations: int, lag: int) -> bool:
    """Whether version `iteration + 1` (the weights after iteration `iteration`) samples some batch of the run."""
    return iteration + 1 + lag <= train_iterations - 1


def drain_batches(done: int, start: int, train_iterations: int, lag: int) -> range:
    """Batches the rollout ranks sampled and sent but the trainers did not train on, when the trainers stop with
    `done` iterations done (none when the run ran to the end)."""
    newest = max(start, min(done, train_iterations - 1 - lag))  # the last version published
    return range(done, min(newest + lag, train_iterations - 1) + 1)
