"""What a run records about its envs: the registered id and the keyword arguments they were made with."""
from __future__ import annotations


def _spec(env):
    inner = getattr(env, "unwrapped", env)
    return getattr(env, "spec", None) or getattr(inner, "spec", None)


def env_id(env) -> str:
    """The registered id of an env (through wrappers), else its class name."""
    return getattr(_spec(env), "id", None) or type(getattr(env, "unwrapped", env)).__name__


def env_kwargs(env) -> dict:
    """The keyword arguments an env was made with (registered defaults included), as recorded in its
    gymnasium spec; `{}` for an env built directly."""
    return dict(getattr(_spec(env), "kwargs", None) or {})
