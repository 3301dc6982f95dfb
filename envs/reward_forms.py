"""The two forms a reward function may take, and how an env calls either of them.

- **per-sample** (this toolkit's own): ``fn(completion, gold, info) -> float | None``, called once
  per finished episode with the solution text, the gold answer and ``info``: the env's keys (below),
  ``prompt`` and ``fields`` (everything a TRL-style function gets as keywords).
- **TRL-style** (``trl.GRPOTrainer``'s): ``fn(prompts, completions, **kwargs) -> list[float | None]``,
  called by keyword with one-element lists: ``prompts=[prompt]``, ``completions=[solution]`` and
  every other field as ``name=[value]``.

Detection (``reward_form``): a function with a parameter named ``completions`` or ``prompts`` is
TRL-style; otherwise one that accepts three positional arguments is per-sample; anything else is
rejected with one line. ``trl_reward(fn)`` and ``per_sample_reward(fn)`` say the form explicitly
(``trl_reward(fn, conversational=True)`` passes prompts and completions as chat message lists; where the
prompt is itself a list of messages, a chat-format prompt, both are always passed that way, as TRL does).

The fields (``reward_fields``): the dataset row's columns where the env has rows (GSM8K: question,
answer; MATH: problem, solution, answer, subject, level, unique_id), ``answer`` (the gold when the
row has no ``answer`` column; GSM8K's holds the whole worked solution, as TRL would pass it), then
the env's own keys, which win over a row column of the same name: ``question``, ``gold``,
``problem_id``, ``mode``, ``steps``, ``parsed_answer`` (None when the answer could not be parsed)
and ``correct``. TRL's ``completion_ids`` and ``trainer_state`` are not passed: the env scores text.
A TRL-style function without ``**kwargs`` gets only the arguments it names.

``None`` means "not applicable": that component is left out of the episode's weighted sum.
"""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["PerSampleReward", "TRLReward", "as_per_sample", "per_sample_reward", "reward_form", "trl_reward"]

PER_SAMPLE, TRL = "per_sample", "trl"
_TRL_NAMES = ("completions", "prompts")
_FORMS_HELP = "per-sample fn(completion, gold, info) or TRL-style fn(prompts, completions, **kwargs)"
_NOT_PASSED = ("completion_ids", "trainer_state")  # TRL passes them; an env scoring text cannot
_RESERVED = ("prompt", "completion", "prompts", "completions", *_NOT_PASSED)  # row columns TRL does not pass on


@dataclass(frozen=True)
class PerSampleReward:
    """A reward function marked as per-sample: ``fn(completion, gold, info) -> float | None``."""

    fn: Callable[..., Any]

    def __call__(self, completion: str, gold: str, info: dict) -> Any:
        return self.fn(completion, gold, info)


@dataclass(frozen=True)
class TRLReward:
    """A TRL-style reward function ``fn(prompts, completions, **kwargs)`` called on one sample."""

    fn: Callable[..., Any]
    conversational: bool = False

    def __call__(self, completion: str, gold: str, info: dict) -> Any:
        prompt = info.get("prompt", "")
        if isinstance(prompt, list):  # a chat-format prompt: conversational, as TRL passes it
            prompt_arg: Any = prompt
            completion_arg: Any = [{"role": "assistant", "content": completion}]
        elif self.conversational:
            prompt_arg = [{"role": "user", "content": str(prompt)}]
            completion_arg = [{"role": "assistant", "content": completion}]
        else:
            prompt_arg, completion_arg = str(prompt), completion
        fields = info.get("fields")
        kwargs = {name: [value] for name, value in (fields if isinstance(fields, Mapping) else {}).items()}
        kwargs.update(prompts=[prompt_arg], completions=[completion_arg])
        accepted = _keyword_names(self.fn)
        if accepted is not None:
            kwargs = {name: value for name, value in kwargs.items() if name in accepted}
        return _single_value(self.fn(**kwargs))


def trl_reward(fn: Callable[..., Any], *, conversational: bool = False) -> TRLReward:
    """Mark ``fn`` as TRL-style; ``conversational=True`` passes chat message lists, not strings."""
    if not callable(fn):
        raise ValueError(f"trl_reward needs a callable; got {type(fn).__name__}")
    _check_passable(fn, _name(fn))
    return TRLReward(fn, conversational)


def per_sample_reward(fn: Callable[..., Any]) -> PerSampleReward:
    """Mark ``fn`` as per-sample: it is called as ``fn(completion, gold, info)``."""
    if not callable(fn):
        raise ValueError(f"per_sample_reward needs a callable; got {type(fn).__name__}")
    return PerSampleReward(fn)


def reward_form(fn: Callable[..., Any], name: str = "") -> str:
    """``"trl"`` or ``"per_sample"`` for ``fn`` (see the module doc); a one-line ValueError for neither."""
    if isinstance(fn, TRLReward):
        return TRL
    if isinstance(fn, PerSampleReward):
        return PER_SAMPLE
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have no readable signature: the historic form
        return PER_SAMPLE
    if any(param in signature.parameters for param in _TRL_NAMES):
        return TRL
    try:
        signature.bind("completion", "gold", {})
    except TypeError:
        label = name or _name(fn)
        raise ValueError(
            f"reward function {label!r} has signature {signature}, which fits neither form: {_FORMS_HELP}; "
            "wrap it with envs.per_sample_reward(fn) or envs.trl_reward(fn)"
        ) from None
    return PER_SAMPLE


def as_per_sample(fn: Callable[..., Any], name: str = "") -> Callable[[str, str, dict], Any]:
    """``fn`` as a per-sample callable: TRL-style functions get the adapter, others pass through."""
    if reward_form(fn, name) == PER_SAMPLE or isinstance(fn, TRLReward):
        return fn
    _check_passable(fn, name or _name(fn))
    return TRLReward(fn)


def reward_fields(row: Mapping[str, Any], gold: str, env_keys: Mapping[str, Any]) -> dict[str, Any]:
    """The fields a reward function sees: row columns, ``answer`` (default: the gold), the env's keys."""
    fields = {str(key): value for key, value in row.items() if key not in _RESERVED}
    fields.setdefault("answer", gold)
    fields.update(env_keys)
    return fields


def _check_passable(fn: Callable[..., Any], name: str) -> None:
    """One-line ValueError if ``fn`` requires an argument no env can pass (token ids, trainer state)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return
    for param in parameters:
        required = param.default is inspect.Parameter.empty and param.kind in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        if required and param.name in _NOT_PASSED:
            raise ValueError(
                f"reward function {name!r} requires {param.name!r}, which envs cannot pass (they score text); "
                f"give it a default, e.g. {param.name}=None"
            )


def _keyword_names(fn: Callable[..., Any]) -> set[str] | None:
    """The keyword names ``fn`` accepts, or None if it takes ``**kwargs`` (or cannot be inspected)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(param.kind is inspect.Parameter.VAR_KEYWORD for param in parameters):
        return None
    keyword_kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {param.name for param in parameters if param.kind in keyword_kinds}


def _single_value(values: Any) -> Any:
    """The one reward in a TRL-style function's output (a list, tuple or 1-D array of length 1)."""
    if isinstance(values, np.ndarray):
        values = values.tolist()
    if not isinstance(values, Sequence) or isinstance(values, (str, bytes)):
        raise TypeError(f"a TRL-style reward function must return a list of rewards; got {type(values).__name__}")
    if len(values) != 1:
        raise ValueError(f"a TRL-style reward function must return one reward per completion (1); got {len(values)}")
    value = values[0]
    if value is None or isinstance(value, numbers.Real):
        return value
    raise TypeError(f"reward must be a real number or None; got {type(value).__name__}")


def _name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__name__", type(fn).__name__))
