"""Trajectories (their declared per-token fields and typed episode outcome), the replay buffer, batch
collation, and step data for PRMs."""
from lmgym.buffers.batch import Batch, collate
from lmgym.buffers.fields import ADVANTAGES, OLD_VALUES, REF_LOGPROBS, RETURNS, TOKEN_REWARD_SHAPING, TokenField
from lmgym.buffers.outcome import ActionRecord, EpisodeOutcome
from lmgym.buffers.replay import ReplayBuffer
from lmgym.buffers.step_pairs import RatedSteps, StepPair, load_step_data, save_step_data, split_by_problem
from lmgym.buffers.trajectory import Trajectory

__all__ = ["ActionRecord", "ADVANTAGES", "Batch", "collate", "EpisodeOutcome", "OLD_VALUES", "REF_LOGPROBS",
           "ReplayBuffer", "RETURNS", "TOKEN_REWARD_SHAPING", "TokenField", "Trajectory", "StepPair", "RatedSteps",
           "save_step_data", "load_step_data", "split_by_problem"]
