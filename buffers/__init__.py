"""Trajectories, their declared per-token fields, the replay buffer and batch collation."""
from buffers.batch import Batch, collate
from buffers.fields import ADVANTAGES, OLD_VALUES, REF_LOGPROBS, RETURNS, TOKEN_REWARD_SHAPING, TokenField
from buffers.replay import ReplayBuffer
from buffers.trajectory import Trajectory

__all__ = ["ADVANTAGES", "Batch", "collate", "OLD_VALUES", "REF_LOGPROBS", "ReplayBuffer", "RETURNS",
           "TOKEN_REWARD_SHAPING", "TokenField", "Trajectory"]
