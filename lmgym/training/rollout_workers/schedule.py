"""Which groups each rank handles and which weights sample which batch: the same arithmetic on every rank, so no
message is needed to agree on it.

Batch b (the one the trainers train on at iteration b) is sampled with policy version `needed_version(b)`:
`max_policy_lag` versions behind, or the version the run started from. Version v is the policy after v iterations
(the trainers' weights as iteration v begins); trainer rank 0 publishes version k + 1 after iteration k's update
when a batch still needs it (`publishes`). A run that stops early (a callback's `should_stop`) leaves the batches
of `drain_batches` sampled but untrained: the trainers receive and discard them, so no send is left waiting."""
from __future__ import annotations


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
