"""What an RL trainer trains on: an env, or a data set wrapped in `Dataset-v0` as TRL's GRPOTrainer takes one.

`GRPO(policy, dataset, config, reward_funcs=[fn])` or `GRPO(policy, train_dataset=dataset, config=config,
reward_funcs=[fn])`, where the data set is a `datasets.Dataset` (one split) or a list of dicts with a "prompt"
column, builds `make("Dataset-v0", dataset=..., reward_fns=reward_funcs)` weighted by the config's
`reward_weights` (TRL's, one per function in order); `eval_dataset` the same for the evaluation env. Anything
else, or a data set without reward functions, is refused in one line when the trainer is built.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lmgym.envs.checks import checked_reward_fns
from lmgym.envs.registry import make
from lmgym.training.config import ConfigError

RewardFuncs = Sequence[Callable] | Mapping[str, Callable] | Callable
WHAT = "an env (lmgym.envs.make(...)), a datasets.Dataset or a list of dicts with a 'prompt' column"


def is_env(value: Any) -> bool:
    """Has the env methods a trainer calls (reset and step)."""
    return callable(getattr(value, "reset", None)) and callable(getattr(value, "step", None))


def is_dataset(value: Any) -> bool:
    """A `datasets.Dataset` (or DatasetDict: refused by Dataset-v0 naming a split) or a list of rows."""
    return hasattr(value, "column_names") or isinstance(value, (list, tuple)) or (
        isinstance(value, Mapping) and all(hasattr(split, "column_names") for split in value.values()))


def trainer_envs(owner: str, env: Any, eval_env: Any, train_dataset: Any, eval_dataset: Any,
                 reward_funcs: RewardFuncs | None, reward_weights: Sequence[float]) -> tuple[Any, Any]:
    """(env, eval_env) for trainer `owner`: each given env as it is, each data set (given as the env or as
    train_dataset / eval_dataset) wrapped in Dataset-v0 with `reward_funcs`. One-line TypeError or ValueError
    for anything else: both an env and train_dataset, neither, an object that is neither kind, a data set without
    reward_funcs, reward_funcs or reward_weights with nothing to wrap, a bad row or reward function."""
    for given, dataset, name in ((env, train_dataset, "env"), (eval_env, eval_dataset, "eval_env")):
        if given is not None and dataset is not None:
            raise TypeError(f"{owner}: pass {name} or {'train' if name == 'env' else 'eval'}_dataset, not both")
    env = train_dataset if env is None else env
    eval_env = eval_dataset if eval_env is None else eval_env
    if env is None:
        raise TypeError(f"{owner} needs something to train on: {WHAT} (as env, or train_dataset=...)")
    wrapped = [value for value in (env, eval_env) if value is not None and not is_env(value) and is_dataset(value)]
    if wrapped and reward_funcs is None:
        raise TypeError(f"{owner}: a dataset needs reward_funcs=[fn, ...] (TRL's reward_funcs), each "
                        f"fn(completions, **kwargs) -> list[float], to score its completions")
    if not wrapped and reward_funcs is not None:
        raise TypeError(f"{owner}: reward_funcs score a dataset's completions; an env scores its own episodes "
                        f"(give it reward_fns: make(..., reward_fns=[fn]))")
    if not wrapped and reward_weights:
        raise ConfigError(f"{owner}: reward_weights weighs the reward functions of a dataset; an env takes its own "
                          f"(make(..., reward_weights={{name: weight}}))", "reward_weights")
    weights = _named_weights(owner, reward_funcs, reward_weights) if wrapped else None
    return (_as_env(owner, env, "env", reward_funcs, weights),
            None if eval_env is None else _as_env(owner, eval_env, "eval_env", reward_funcs, weights))


def _as_env(owner: str, value: Any, name: str, reward_funcs: Any, weights: dict[str, float] | None) -> Any:
    if is_env(value):
        return value
    if not is_dataset(value):
        raise TypeError(f"{owner}: {name} must be {WHAT}; got {type(value).__name__}")
    return make("Dataset-v0", dataset=value, reward_fns=_listed(reward_funcs), reward_weights=weights)


def _listed(reward_funcs: Any) -> Any:
    """One function, as TRL takes it too, is a list of one."""
    return [reward_funcs] if callable(reward_funcs) else reward_funcs


def _named_weights(owner: str, reward_funcs: Any, reward_weights: Sequence[float]) -> dict[str, float] | None:
    """reward_weights (one per function, in order) keyed by the names Dataset-v0 gives the functions."""
    try:
        names = list(checked_reward_fns(_listed(reward_funcs)))
    except ValueError as err:
        raise ValueError(f"{owner}: {str(err).replace('reward_fns', 'reward_funcs')}") from None
    if not reward_weights:
        return None
    if len(reward_weights) != len(names):
        raise ConfigError(f"{owner}: reward_weights has {len(reward_weights)} weights for {len(names)} reward "
                          f"functions ({', '.join(names)}); give one per function, in order", "reward_weights")
    return dict(zip(names, (float(w) for w in reward_weights)))
