"""Running policies in language environments: the batched episode engine, rollouts and branch state."""
from episodes.limits import episode_step_limit

__all__ = ["episode_step_limit"]
