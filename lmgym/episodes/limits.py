"""How many actions one episode may take: the env's own limit, the only one."""
from __future__ import annotations

DEFAULT_STEP_LIMIT = 32  # an env that states no limit of its own (no max_steps, no TimeLimit wrapper)


def episode_step_limit(env) -> int:
    """The most actions an episode of `env` takes: its `max_steps` (a `LanguageEnv`'s truncation) and every
    `TimeLimit` wrapper's `max_episode_steps`, whichever is smallest; `DEFAULT_STEP_LIMIT` when it states none.

    Single-turn envs end after one action whatever this says; a trainer's token budget for a whole episode
    is `max_new_tokens * episode_step_limit(env)` for multi-step envs.
    """
    limits = []
    layer = env
    while True:
        own = getattr(layer, "_max_episode_steps", None)  # gymnasium.wrappers.TimeLimit
        if isinstance(own, int) and own > 0:
            limits.append(own)
        inner = getattr(layer, "env", None)
        if inner is None or inner is layer:
            break
        layer = inner
    base = getattr(env, "unwrapped", env)
    steps = getattr(base, "max_steps", None)
    if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
        limits.append(steps)
    return min(limits) if limits else DEFAULT_STEP_LIMIT
