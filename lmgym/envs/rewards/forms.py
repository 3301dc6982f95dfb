"""The two forms a reward function may take, and how an env calls either of them.

- **per-sample** (this toolkit's own): ``fn(completion, gold, info) -> float | None``, called once
  per finished episode with the solution text, the gold answer and ``info``: the env's keys (below),
  ``prompt`` and ``fields`` (everything a TRL-style function gets as keywords).
- **TRL-style** (``trl.GRPOTrainer``'s): ``fn(prompts, completions, **kwargs) -> list[float | None]``,
  called by keyword with lists, one element per completion: ``prompts``, ``completions``,
  ``completion_ids`` and every other field as ``name=[...]``. Rollouts (every trainer, evaluation) call
  it once per batch of finished episodes (``envs/rewards/batch.py``); ``env.step`` alone calls it with
  one-element lists and no ``completion_ids``.

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
and ``correct``. ``completion_ids`` are each completion's token ids as sampled (in multi-turn envs,
with the env's injected tokens, matching ``completions``); a function that requires them cannot be
scored by ``env.step`` alone (a one-line reward error). TRL's ``trainer_state`` is not passed (there is
no transformers TrainerState here); a function must give it a default.
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

__all__ = ["PerSampleReward", "RewardFn", "TRLReward", "as_per_sample", "per_sample_reward", "reads_only",
           "reward_form", "trl_reward"]

RewardFn = Callable[[str, str, dict], float]  # the per-sample form, as an env holds every reward function

PER_SAMPLE, TRL = "per_sample", "trl"
_TRL_NAMES = ("completions", "prompts")
_FORMS_HELP = "per-sample fn(completion, gold, info) or TRL-style fn(prompts, completions, **kwargs)"
_NOT_PASSED = ("trainer_state",)  # TRL passes it; this toolkit has no transformers TrainerState
_RESERVED = ("prompt", "completion", "prompts", "completions", "completion_ids", *_NOT_PASSED)  # not passed on


@dataclass(frozen=True)
class PerSampleReward:
    """A reward function marked as per-sample: ``fn(completion, gold, info) -> float | None``."""

    fn: Callable[..., Any]

    def __call__(self, completion: str, gold: str, info: dict) -> Any:
        return self.fn(completion, gold, info)


@dataclass(frozen=True)
class TRLReward:
    """A TRL-style reward function ``fn(prompts, completions, **kwargs)``: ``batch`` scores many samples in one
    call (the episode engine's way); calling it scores one sample with one-element lists (``env.step`` alone)."""

    fn: Callable[..., Any]
    conversational: bool = False

    def __call__(self, completion: str, gold: str, info: dict) -> Any:
        return _single_value(self.batch([(completion, info)]))

    def batch(self, samples: Sequence[tuple[str, Mapping[str, Any]]],
              completion_ids: Sequence[list[int]] | None = None) -> list[Any]:
        """The rewards of ``samples`` ((completion, info) each) from one call of ``fn`` with TRL's keyword lists;
        ``completion_ids``: each completion's token ids (None where no tokens exist: ``env.step`` alone)."""
        columns: dict[str, list[Any]] = {}
        for k, (_, info) in enumerate(samples):
            fields = info.get("fields")
            for name, value in (fields if isinstance(fields, Mapping) else {}).items():
                columns.setdefault(name, [None] * len(samples))[k] = value
        pairs = [self._prompt_and_completion(completion, info) for completion, info in samples]
        kwargs: dict[str, Any] = {**columns, "prompts": [p for p, _ in pairs], "completions": [c for _, c in pairs]}
        accepted = _keyword_names(self.fn)
        if completion_ids is not None:
            kwargs["completion_ids"] = [list(ids) for ids in completion_ids]
        elif "completion_ids" in _required_names(self.fn):
            raise ValueError("completion_ids are passed only when the episode engine scores a batch (rollout, the "
                             "trainers); env.step alone has no token ids")
        if accepted is not None:
            kwargs = {name: value for name, value in kwargs.items() if name in accepted}
        return _checked_list(self.fn(**kwargs), len(samples))

    def _prompt_and_completion(self, completion: str, info: Mapping[str, Any]) -> tuple[Any, Any]:
        prompt = info.get("prompt", "")
        if isinstance(prompt, list):  # a chat-format prompt: conversational, as TRL passes it
            return prompt, [{"role": "assistant", "content": completion}]
        if self.conversational:
            return [{"role": "user", "content": str(prompt)}], [{"role": "assistant", "content": completion}]
        return str(prompt), completion


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


def reads_only(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a per-sample reward function as one that never changes its ``info``: the env then lets it share one
    copy of the episode's context with the other marked functions, where an unmarked function gets a deep copy of
    its own (a copy per function and episode was a quarter of a RAG rollout's host time). Returns ``fn``."""
    fn.lmgym_reads_only = True
    return fn


def shares_context(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` was marked with ``reads_only``."""
    return getattr(fn, "lmgym_reads_only", False) is True


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
    """One-line ValueError if ``fn`` requires an argument this toolkit never passes (``trainer_state``)."""
    for param_name in sorted(_required_names(fn) & set(_NOT_PASSED)):
        raise ValueError(
            f"reward function {name!r} requires {param_name!r}, which this toolkit does not pass (it has no "
            f"transformers TrainerState); give it a default, e.g. {param_name}=None"
        )


def _required_names(fn: Callable[..., Any]) -> set[str]:
    """The parameters of ``fn`` that have no default (positional-or-keyword and keyword-only)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return set()
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name for p in parameters if p.kind in kinds and p.default is inspect.Parameter.empty}


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


def _checked_list(values: Any, size: int) -> list[Any]:
    """A TRL-style function's output as a list of ``size`` rewards (a list, tuple or 1-D array); else an error."""
    if isinstance(values, np.ndarray):
        values = values.tolist()
    if not isinstance(values, Sequence) or isinstance(values, (str, bytes)):
        raise TypeError(f"a TRL-style reward function must return a list of rewards; got {type(values).__name__}")
    if len(values) != size:
        raise ValueError(f"a TRL-style reward function must return one reward per completion ({size}); "
                         f"got {len(values)}")
    return list(values)


def _single_value(values: list[Any]) -> Any:
    """The one reward of a one-sample call: a real number or None."""
    value = values[0]
    if value is None or isinstance(value, numbers.Real):
        return value
    raise TypeError(f"reward must be a real number or None; got {type(value).__name__}")


def _name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__name__", type(fn).__name__))
