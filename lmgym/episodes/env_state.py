"""The episode state of a (possibly wrapped) env, and what that state says about the next action.

Wrapped envs (any ``gymnasium.Wrapper`` chain, e.g. ``TimeLimit(env)``) work: ``reset`` and ``step``
go through the wrappers, so their logic applies; ``get_state``/``set_state``/``stop_strings``/
``current_role`` are read from ``env.unwrapped``; the capabilities ``is_multi_step`` and ``is_stepwise``
through ``get_wrapper_attr`` (a wrapper may declare its own). Each wrapper's plain-data attributes (numbers,
strings, None and lists, tuples, dicts of them, e.g. TimeLimit's step counter) are saved and restored
with the episode state, so branches never see each other's steps; any other attribute is shared by all
branches. A gymnasium vector env is refused in one line (``check_not_vector``): branching one env's
state is how many episodes run at once here.

How many actions one episode may take (`episode_step_limit`) is the env's own limit, the only one.

``prepared_steps`` hands the env every action of a batch before they are stepped one by one (its
``prepare_steps``, read from ``env.unwrapped``; see ``LanguageEnv.prepare_steps``). A wrapper that rewrites
actions leaves some of that work unused, never wrong: a tool env keys what it prepared by the call itself.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import gymnasium

from lmgym.core.state_copy import deep_copy
from lmgym.envs import episode_state
from lmgym.envs.base import LanguageEnv

DEFAULT_ROLE = "policy"  # the role that acts in an env that names none
DEFAULT_STEP_LIMIT = 32  # an env that states no limit of its own (no max_steps, no TimeLimit wrapper)
_UNSET = object()


def check_not_vector(env, owner: str) -> None:
    """One-line ValueError if ``env`` is a gymnasium vector env (``SyncVectorEnv``/``AsyncVectorEnv``/a vector
    wrapper): episodes branch one env's saved states, so N copies of it add nothing; the line names what to pass."""
    if isinstance(env, gymnasium.vector.VectorEnv):
        raise ValueError(
            f"{owner}: got a gymnasium {type(env).__name__} of {env.num_envs} envs; pass the env itself (e.g. "
            f"lmgym.envs.make('Arithmetic-v0')): the trainer batches prompts_per_iteration x samples_per_prompt "
            f"episodes of one env in each sampling call, branching its saved state")


def get_branch_state(env, copy: bool = True) -> dict[str, Any]:
    """The episode state of a (possibly wrapped) env: the base env's state plus each wrapper's plain data.

    copy=False hands over the env's own objects instead of copies where it can (a ``LanguageEnv`` whose
    ``get_state`` is the base one, and the wrappers' attributes): for a caller that calls
    ``set_branch_state`` (or ``detach_branch_state``) before the env steps again, which rebinds every one of
    them to fresh copies, so the state it took is then its own. The episode engine saves each branch's
    state so: one copy per step (the restore) instead of two."""
    base = base_env(env)
    if not copy and type(base).get_state is LanguageEnv.get_state:
        state = episode_state.save(base, base.mode, copy=False)
    else:
        state = base.get_state()
    return {"env": state, "wrappers": [_plain_attributes(w, copy) for w in _wrappers(env)]}


def set_branch_state(env, state: dict[str, Any], copy: bool = True) -> None:
    """Restore a state from ``get_branch_state`` into the same (possibly wrapped) env, as copies: stepping
    the env never changes ``state``. ``copy=False`` hands the env the state's own objects where it can (a
    ``LanguageEnv`` whose ``set_state`` is the base one, and the wrappers' attributes): for a caller that is
    the state's only holder and takes the stepped state back (the episode engine, `Branch.owns_state`)."""
    for wrapper, attributes in zip(_wrappers(env), state["wrappers"]):
        vars(wrapper).update(deep_copy(attributes) if copy else attributes)
    base = base_env(env)
    if not copy and type(base).set_state is LanguageEnv.set_state:
        episode_state.restore(base, base.mode, state["env"], copy=False)
    else:
        base.set_state(state["env"])


def detach_branch_state(env) -> None:
    """Give the env copies of its current episode objects (its state is unchanged), so that a state taken
    from it with ``get_branch_state(env, copy=False)`` shares nothing with it any more. Nothing to do for an
    unwrapped env whose ``get_state`` copies anyway."""
    if type(base_env(env)).get_state is LanguageEnv.get_state or _wrappers(env):
        set_branch_state(env, get_branch_state(env, copy=False))


@contextmanager
def prepared_steps(env, actions: Sequence[str]) -> Iterator[bool]:
    """Within the block, the (possibly wrapped) env has been given ``actions``, the batch about to be stepped
    (its ``prepare_steps``), and at the end ``[]`` (what it kept is dropped); yields whether it has the hook.
    An env without ``prepare_steps`` is left as it is."""
    prepare = getattr(base_env(env), "prepare_steps", None)
    if not callable(prepare):
        yield False
        return
    prepare(list(actions))
    try:
        yield True
    finally:
        prepare([])


def is_multi_step(env) -> bool:
    """Whether an episode of the (possibly wrapped) env may take several actions: its ``is_multi_step``
    (``LanguageEnv``: any mode but "single"); False for a plain env that does not say."""
    return _capability(env, "is_multi_step")


def declares_single_turn(env) -> bool:
    """Whether the (possibly wrapped) env says that an episode is one action: its ``is_multi_step`` is False
    (``LanguageEnv`` in "single" mode). A plain env that does not say is not assumed single-turn."""
    try:
        return _capability_or_none(env, "is_multi_step") is False
    except ValueError:
        return False


def is_stepwise(env) -> bool:
    """Whether each action of the (possibly wrapped) env is one reasoning step ending at a line break: its
    ``is_stepwise`` (``LanguageEnv``: mode "stepwise"); False for a plain env that does not say."""
    return _capability(env, "is_stepwise")


def next_stop_strings(env) -> list[str] | None:
    """Stop strings for the env's next action in its current state: its ``stop_strings``, else ["\\n"]
    for stepwise envs and None (stop at EOS or the length limit) for others."""
    stop = getattr(base_env(env), "stop_strings", _UNSET)
    if stop is _UNSET:
        stop = ["\n"] if is_stepwise(env) else None
    return list(stop) if stop is not None else None


def next_role(env) -> str:
    """Which role acts next in the env's current state: its ``current_role``, else ``DEFAULT_ROLE``."""
    role = getattr(base_env(env), "current_role", DEFAULT_ROLE)
    if not isinstance(role, str) or not role:
        raise ValueError(f"{type(base_env(env)).__name__}.current_role must be a non-empty str; got {role!r}")
    return role


def _capability(env, name: str) -> bool:
    """A declared capability: through gymnasium's ``get_wrapper_attr`` (the outermost wrapper that defines it,
    else the env), or the attribute of a plain env; False when none defines it. A non-bool is a ValueError."""
    return bool(_capability_or_none(env, name))


def _capability_or_none(env, name: str) -> bool | None:
    """`_capability`, None when no layer defines it."""
    try:
        value = env.get_wrapper_attr(name) if hasattr(env, "get_wrapper_attr") else getattr(env, name)
    except AttributeError:
        return None
    if not isinstance(value, bool):
        raise ValueError(f"{type(base_env(env)).__name__}.{name} must be a bool; got {value!r}")
    return value


def base_env(env):
    """The innermost env of a wrapper chain (the env itself when unwrapped)."""
    return getattr(env, "unwrapped", env)


def _wrappers(env) -> list:
    layers = []
    while env is not base_env(env) and hasattr(env, "env"):
        layers.append(env)
        env = env.env
    return layers


def _plain_attributes(wrapper, copy: bool = True) -> dict[str, Any]:
    return {k: deep_copy(v) if copy else v for k, v in vars(wrapper).items() if k != "env" and _is_plain(v)}


def _is_plain(value: Any, depth: int = 0) -> bool:
    """True for None, bool, int, float, str and (up to 4 levels) lists, tuples and str-keyed dicts of them."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if depth >= 4:
        return False
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v, depth + 1) for k, v in value.items())
    return False


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
