"""Trajectories (their declared per-token fields and typed episode outcome), the replay buffer, batch
collation, and step data for PRMs."""
from buffers.batch import Batch, collate
from buffers.fields import ADVANTAGES, OLD_VALUES, REF_LOGPROBS, RETURNS, TOKEN_REWARD_SHAPING, TokenField
from buffers.outcome import ActionRecord, EpisodeOutcome
from buffers.replay import ReplayBuffer
from buffers.step_pairs import RatedSteps, StepPair, load_step_data, save_step_data, split_by_problem
from buffers.trajectory import Trajectory

__all__ = ["ActionRecord", "ADVANTAGES", "Batch", "collate", "EpisodeOutcome", "OLD_VALUES", "REF_LOGPROBS",
           "ReplayBuffer", "RETURNS", "TOKEN_REWARD_SHAPING", "TokenField", "Trajectory", "StepPair", "RatedSteps",
           "save_step_data", "load_step_data", "split_by_problem"]
