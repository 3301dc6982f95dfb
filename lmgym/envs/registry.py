"""Environment ids, registered as data with lazy "module:Class" entry points.

Registration goes through gymnasium's registry, so every env gets a proper
``env.spec`` (``gymnasium.utils.env_checker.check_env`` uses it to remake the env).
``make`` keeps its own list of ids so it only builds this package's language envs.

The built-in ids also answer to ``lmgym/<id>`` (e.g. ``lmgym/Arithmetic-v0``), in ``make`` and in
``gymnasium.make`` (and, until the next release, to the 0.2.0 namespace ``rlgym/<id>``). gymnasium >= 1.0
loads no plugins by itself (its ``gymnasium.envs`` entry-point plugin system was removed in 1.0), so a process
that has not imported ``lmgym`` names the module in the id, as gymnasium 1.x does for every third-party
package: ``gymnasium.make("lmgym:lmgym/Arithmetic-v0")`` imports ``lmgym`` and builds the env. As with ale_py,
``import lmgym; gymnasium.register_envs(lmgym)`` (a no-op that keeps the import from looking unused) then
``gymnasium.make("lmgym/GSM8K-v0")`` works too: importing ``lmgym`` registers every id.

A gymnasium vector env (``SyncVectorEnv``/``AsyncVectorEnv``) is for running N copies of an env in step;
the trainers refuse one in one line and take the env itself: they run many episodes of one env at once by
branching its saved state (``lmgym.episodes.check_not_vector``).

Built-in ids: ``Arithmetic-v0`` / ``ArithmeticStepwise-v0`` (level 1), ``GSM8K-v0`` /
``GSM8KStepwise-v0``, ``MATH-v0`` / ``MATHStepwise-v0``, and ``ToolArithmetic-v0``: level-2 arithmetic
in mode "multi_turn" with the calculator tool (``<calc>EXPRESSION</calc>``, answered with
``<result>VALUE</result>``; the final answer in ``<answer>...</answer>``; see ``envs/tool_env.py``),
``HotpotQA-v0`` (single turn, ``context="closed_book"`` or ``"distractor"``; ``envs/hotpotqa/env.py``) and
``RAG-HotpotQA-v0`` (multi-turn: ``<search>QUERY</search>`` over a document store given as ``store=``,
then ``<answer>...</answer>``; ``envs/hotpotqa/rag.py``) and ``Questions-v0``: stepwise math over the questions
given as ``questions=[...]``, without gold answers (``envs/questions.py``; the server's /solve).
``Dataset-v0``: single-turn episodes over a ``datasets.Dataset`` or list of dicts with a "prompt" column (text
or chat messages), scored by TRL-style or per-sample reward functions:
``make("Dataset-v0", dataset=rows, reward_fns=[fn])`` (``envs/dataset_env.py``).
``Reflection-MATH-v0``, ``Reflection-GSM8K-v0`` and ``Reflection-Arithmetic-v0`` (level 2): an actor answers,
a critic reviews, the actor refines, up to ``max_turns`` answers (roles "actor" and "critic";
``envs/reflection.py``; task keyword arguments such as ``data_path`` pass through).

Adding an env takes three lines::

    class MyEnv(LanguageEnv): ...           # provide num_problems and get_problem
    register("MyEnv-v0", MyEnv)             # or "my_module:MyEnv"
    env = make("MyEnv-v0", reward_fns={"exact": my_reward})  # or a class-level default_reward_fns

What a run records about its envs reads their gymnasium spec: `env_id` (the registered id, through wrappers)
and `env_kwargs` (the keyword arguments it was made with).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

import gymnasium

from lmgym.envs.base import LanguageEnv

NAMESPACE = "lmgym"
OLD_NAMESPACE = "rlgym"  # 0.2.0's; its ids still build until the next release
_REGISTERED: dict[str, None] = {}  # ordered set of this package's ids
_ALIASES: dict[str, str] = {}  # "lmgym/Arithmetic-v0" (and "rlgym/...") -> "Arithmetic-v0"


class UnknownEnvError(KeyError):
    """``make`` was given an id that is not registered; the message suggests close matches."""

    def __init__(self, env_id: str, known_ids: list[str]):
        self.env_id = env_id
        self.known_ids = list(known_ids)
        suggestions = _close_matches(env_id, self.known_ids)
        hint = f" (did you mean {' or '.join(repr(s) for s in suggestions)}?)" if suggestions else ""
        self.message = f"unknown env id {env_id!r}{hint}; known ids: {', '.join(self.known_ids)}"
        super().__init__(self.message)

    def __str__(self) -> str:  # KeyError would wrap the message in quotes
        return self.message


def _close_matches(env_id: str, known_ids: list[str]) -> list[str]:
    by_lower = {known.lower(): known for known in known_ids}
    matches = difflib.get_close_matches(str(env_id).lower(), list(by_lower), n=3, cutoff=0.6)
    return [by_lower[match] for match in matches]


def register(id: str, entry_point: str | Callable[..., LanguageEnv], **default_kwargs: Any) -> None:  # noqa: A002
    """Register ``id`` to build ``entry_point`` ("module:Class" or a class) with ``default_kwargs``.

    Registering an id again replaces its entry (gymnasium logs a warning).
    """
    _gymnasium_register(id, entry_point, default_kwargs)
    _REGISTERED[id] = None


def _gymnasium_register(env_id: str, entry_point: str | Callable[..., LanguageEnv], kwargs: dict) -> None:
    gymnasium.register(
        id=env_id,
        entry_point=entry_point,
        kwargs=kwargs,
        order_enforce=False,  # LanguageEnv raises its own EpisodeOverError
        disable_env_checker=True,  # the checker lives in the tests, not on every step
    )


def _register_built_in(name: str, entry_point: str, **default_kwargs: Any) -> None:
    """Register ``name`` and its namespaced aliases ``lmgym/<name>`` and (0.2.0's) ``rlgym/<name>``."""
    register(name, entry_point, **default_kwargs)
    for namespace in (NAMESPACE, OLD_NAMESPACE):
        _gymnasium_register(f"{namespace}/{name}", entry_point, default_kwargs)
        _ALIASES[f"{namespace}/{name}"] = name


def registered_ids() -> list[str]:
    """The ids registered through this module, in registration order (built-ins also as ``lmgym/<id>``)."""
    return list(_REGISTERED)


def make(id: str, **kwargs: Any) -> LanguageEnv:  # noqa: A002 - same name as gymnasium.make
    """Build a registered env; ``kwargs`` override the registered defaults.

    Returns the env itself, not a gymnasium wrapper: gymnasium 1.x wrappers do not
    forward custom methods, and ``get_state``/``set_state`` must work directly on
    the returned object. The env still carries its ``spec``.
    """
    if id not in _REGISTERED and id not in _ALIASES:
        raise UnknownEnvError(id, registered_ids())
    env = gymnasium.make(id, **kwargs).unwrapped
    if not isinstance(env, LanguageEnv):
        raise TypeError(f"the entry point of {id!r} built a {type(env).__name__}, which is not a LanguageEnv")
    return env


_register_built_in("Arithmetic-v0", "lmgym.envs.arithmetic:ArithmeticEnv", level=1, mode="single")
_register_built_in("ArithmeticStepwise-v0", "lmgym.envs.arithmetic:ArithmeticEnv", level=1, mode="stepwise")
_register_built_in("GSM8K-v0", "lmgym.envs.math:GSM8KEnv", mode="single")
_register_built_in("GSM8KStepwise-v0", "lmgym.envs.math:GSM8KEnv", mode="stepwise")
_register_built_in("MATH-v0", "lmgym.envs.math:MATHEnv", mode="single")
_register_built_in("MATHStepwise-v0", "lmgym.envs.math:MATHEnv", mode="stepwise")
_register_built_in("ToolArithmetic-v0", "lmgym.envs.arithmetic:ToolArithmeticEnv", level=2, mode="multi_turn")
_register_built_in("HotpotQA-v0", "lmgym.envs.hotpotqa.env:HotpotQAEnv", mode="single", context="closed_book")
_register_built_in("RAG-HotpotQA-v0", "lmgym.envs.hotpotqa.rag:RAGHotpotQAEnv", mode="multi_turn")
_register_built_in("Questions-v0", "lmgym.envs.questions:QuestionsEnv", mode="stepwise")
_register_built_in("Dataset-v0", "lmgym.envs.dataset_env:DatasetEnv", mode="single")
_register_built_in("Reflection-MATH-v0", "lmgym.envs.reflection:ReflectionEnv", task="MATH-v0", mode="multi_turn")
_register_built_in("Reflection-GSM8K-v0", "lmgym.envs.reflection:ReflectionEnv", task="GSM8K-v0", mode="multi_turn")
_register_built_in("Reflection-Arithmetic-v0", "lmgym.envs.reflection:ReflectionEnv", task="Arithmetic-v0", level=2,
                   mode="multi_turn")


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
