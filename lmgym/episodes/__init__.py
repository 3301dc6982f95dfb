"""Running policies in language environments: the batched episode engine, rollouts and branch state."""
from lmgym.episodes.engine import INJECTED_ROLE, Branch, EpisodeEngine, SamplingSettings
from lmgym.episodes.env_state import (
                                DEFAULT_ROLE,
                                check_not_vector,
                                detach_branch_state,
                                episode_step_limit,
                                get_branch_state,
                                is_multi_step,
                                is_stepwise,
                                next_role,
                                next_stop_strings,
                                prepared_steps,
                                set_branch_state,
)
from lmgym.episodes.rollout import rollout

__all__ = [
    "Branch", "EpisodeEngine", "SamplingSettings", "rollout", "episode_step_limit", "get_branch_state",
    "set_branch_state", "is_multi_step", "is_stepwise", "next_role", "next_stop_strings", "DEFAULT_ROLE",
    "INJECTED_ROLE", "check_not_vector", "prepared_steps", "detach_branch_state",
]
