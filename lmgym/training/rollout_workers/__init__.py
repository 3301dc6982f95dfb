"""Rollout ranks apart from trainer ranks (`rollout_workers: R`): who is which and which batch each handles with
which weights (`roles`), the versioned weights trainer rank 0 broadcasts (`weights`), the trajectories rollout
ranks send (`transport`). The RL side (seeds, groups, lag) is algorithms/async_rollouts.py."""
from lmgym.training.rollout_workers.roles import (
    Roles,
    drain_batches,
    group_slice,
    needed_version,
    publishes,
    split_ranks,
)
from lmgym.training.rollout_workers.transport import Batch, TrajectoryReceiver, TrajectorySender
from lmgym.training.rollout_workers.weights import Message, WeightPublisher, receive_weights

__all__ = ["Batch", "Message", "Roles", "TrajectoryReceiver", "TrajectorySender", "WeightPublisher", "drain_batches",
           "group_slice", "needed_version", "publishes", "receive_weights", "split_ranks"]
