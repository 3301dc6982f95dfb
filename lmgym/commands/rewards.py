"""`--reward_funcs` as `trl grpo` takes them: built-in names, or dotted names `module.fn` of your own functions.

A dotted name imports `module` (the current folder first on the path, as `python -m` has it) and takes its
attribute `fn`: TRL's form `fn(completions, **kwargs) -> list[float]` (each data set column a keyword) or the
per-sample `fn(completion, gold, info) -> float` (envs/rewards/forms.py). A built-in name is one of `BUILT_IN`.
Anything that does not resolve to a callable is one ValueError line naming it.
"""
from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Sequence

from lmgym.core.messages import did_you_mean, one_line

# built-in name -> (module, attribute): the toolkit's reward functions, and TRL's name for the same check
BUILT_IN = {
    "correctness_reward": ("lmgym.envs.rewards.functions", "correctness_reward"),
    "accuracy_reward": ("lmgym.envs.rewards.functions", "accuracy_reward"),
    "format_reward": ("lmgym.envs.rewards.functions", "format_reward"),
}
ABOUT = ("built-in: correctness_reward (1 when the final answer equals the row's answer column), accuracy_reward "
         "(TRL's: the same against the solution column), format_reward (1 when a final answer is marked with #### or "
         "\\boxed{}); or module.fn, your own")


def reward_function(name: str) -> Callable:
    """The function `name` stands for (see the module doc); one-line ValueError otherwise."""
    if name in BUILT_IN:
        module, attribute = BUILT_IN[name]
        return getattr(importlib.import_module(module), attribute)
    module_name, dot, attribute = name.rpartition(".")
    if not dot or not module_name or not attribute:
        raise ValueError(f"--reward_funcs {name!r} is neither a built-in name nor module.fn"
                         f"{did_you_mean(name, BUILT_IN)}; {ABOUT}")
    module = _import(module_name, name)
    if not hasattr(module, attribute):
        raise ValueError(f"--reward_funcs {name}: module {module_name} has no {attribute!r}")
    function = getattr(module, attribute)
    if not callable(function):
        raise ValueError(f"--reward_funcs {name}: {attribute} is a {type(function).__name__}, not a function")
    return function


def reward_functions(names: Sequence[str]) -> list[Callable]:
    """The functions of `--reward_funcs` (each may also be a comma-separated list), in order."""
    flat = [part.strip() for name in names for part in name.split(",") if part.strip()]
    if not flat:
        raise ValueError(f"--reward_funcs names no function; {ABOUT}")
    return [reward_function(name) for name in flat]


def _import(module_name: str, name: str):
    """`module_name` imported with the current folder on the path; an import that fails is one line."""
    here = os.getcwd()
    added = here not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        return importlib.import_module(module_name)
    except Exception as err:  # a missing module, a syntax error or any error raised while it runs
        raise ValueError(f"--reward_funcs {name}: cannot import {module_name} ({type(err).__name__}: "
                         f"{one_line(str(err))[:200]})") from None
    finally:
        if added:
            sys.path.remove(here)
