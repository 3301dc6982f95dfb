"""Trajectories, the replay buffer and batch collation."""
from buffers.batch import Batch, collate
from buffers.replay import ReplayBuffer
from buffers.trajectory import Trajectory

__all__ = ["Batch", "collate", "ReplayBuffer", "Trajectory"]
