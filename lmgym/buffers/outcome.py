"""`EpisodeOutcome`: the per-episode facts an env reports, typed and frozen, as the trainer side reads them.

An env returns these facts as `info` keys (the gymnasium contract: `info["correct"]`, `["parsed_answer"]`,
`["reward_components"]`, `["reward_errors"]`, `["problem_id"]`, and a `ReflectionEnv`'s `["turn_answers"]`
and `["turn_correct"]`); `EpisodeOutcome.from_info` reads them once, checking their types, and everything
after (metrics, reward combination, search, step and pair data) reads the outcome's fields. The episode
engine adds one `ActionRecord` per action: who acted, what it wrote and what the env wrote after it
(`info["injected_text"]`/`["injected_role"]`, which the env's info holds for the latest step only).

Frozen means frozen: the mappings are read-only views of private copies and the sequences are tuples, so an
outcome can be shared between trajectories, copies and processes (it pickles through `to_dict`).
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

import numpy as np

__all__ = ["ActionRecord", "EpisodeOutcome"]

INFO_KEYS = ("correct", "parsed_answer", "reward_components", "reward_errors", "problem_id", "turn_answers",
             "turn_correct")  # the info keys `from_info` reads (every other key is left to `info`)


def _empty_mapping() -> Mapping:
    return MappingProxyType({})


@dataclass(frozen=True)
class ActionRecord:
    """One action of an episode, as the episode engine played it.

    role: who acted (the policy's role name); text: the action as sampled; injected_text: what the env wrote
    after it and the engine appended ("" for none, and after the final action); injected_role: None when that
    text is raw text, else the chat role ("tool", "user") of the turn holding it.
    """

    role: str
    text: str
    injected_text: str = ""
    injected_role: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.role, str) or not self.role:
            raise ValueError(f"episode outcome: an action's role must be a non-empty str, got {self.role!r}")
        for name in ("text", "injected_text"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"episode outcome: an action's {name} must be a str, got "
                                 f"{type(getattr(self, name)).__name__}")
        if self.injected_role is not None and (not isinstance(self.injected_role, str) or not self.injected_role):
            raise ValueError(f"episode outcome: injected_role must be None or a chat role name, got "
                             f"{self.injected_role!r}")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class EpisodeOutcome:
    """What an episode came to, as its env reported it (defaults: the env reported nothing).

    correct: the env's verdict on the final answer (False without one); parsed_answer: that answer (None:
    none parsed); reward_components: reward function name -> value (None: not applicable; empty: the env
    reports no components); reward_errors: reward function name -> "ExceptionType: message" for every
    function that failed on this episode, at any step; problem_id: the problem's id ("" when the env names
    none); turn_answers / turn_correct: the parsed answer and verdict of each graded answering turn (a
    ReflectionEnv's actor turns; empty for other envs); actions: one `ActionRecord` per action the engine
    played (empty for episodes not played by the engine, and in buffers saved before outcomes existed).
    """

    correct: bool = False
    parsed_answer: str | None = None
    reward_components: Mapping[str, float | None] = field(default_factory=_empty_mapping, hash=False)
    reward_errors: Mapping[str, str] = field(default_factory=_empty_mapping, hash=False)
    problem_id: str = ""
    turn_answers: tuple[str | None, ...] = ()
    turn_correct: tuple[bool, ...] = ()
    actions: tuple[ActionRecord, ...] = ()

    def __post_init__(self) -> None:
        freeze = object.__setattr__  # the one place a frozen outcome is written: its own checked copies
        freeze(self, "correct", _checked_bool("correct", self.correct))
        if self.parsed_answer is not None and not isinstance(self.parsed_answer, str):
            raise ValueError(f"episode outcome: parsed_answer must be a str or None, got "
                             f"{type(self.parsed_answer).__name__} {self.parsed_answer!r}")
        freeze(self, "reward_components", MappingProxyType(_checked_components(self.reward_components)))
        freeze(self, "reward_errors", MappingProxyType(_checked_errors(self.reward_errors)))
        freeze(self, "problem_id", _checked_problem_id(self.problem_id))
        freeze(self, "turn_answers", _checked_answers(self.turn_answers))
        freeze(self, "turn_correct", tuple(_checked_bool(f"turn_correct[{i}]", v)
                                           for i, v in enumerate(_sequence("turn_correct", self.turn_correct))))
        if self.turn_answers and len(self.turn_answers) != len(self.turn_correct):
            raise ValueError(f"episode outcome: turn_answers has {len(self.turn_answers)} entries but turn_correct "
                             f"{len(self.turn_correct)}")
        freeze(self, "actions", tuple(_action(a) for a in _sequence("actions", self.actions)))

    @classmethod
    def from_info(cls, info: Mapping[str, Any], actions: Sequence[ActionRecord] = ()) -> EpisodeOutcome:
        """The outcome an env's final `info` reports (absent keys keep their defaults), with the engine's
        `actions`; a key of the wrong type is a one-line ValueError naming it."""
        if not isinstance(info, Mapping):
            raise ValueError(f"episode outcome: info must be a mapping, got {type(info).__name__}")
        return cls(**{key: info[key] for key in INFO_KEYS if key in info}, actions=tuple(actions))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (dicts and lists), read back by `from_dict`."""
        return {"correct": self.correct, "parsed_answer": self.parsed_answer,
                "reward_components": dict(self.reward_components), "reward_errors": dict(self.reward_errors),
                "problem_id": self.problem_id, "turn_answers": list(self.turn_answers),
                "turn_correct": list(self.turn_correct), "actions": [a.to_dict() for a in self.actions]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EpisodeOutcome:
        """Read `to_dict` output back; an unknown or ill-typed field is a one-line ValueError naming it."""
        if not isinstance(data, Mapping):
            raise ValueError(f"outcome must be a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"outcome: unknown field(s): {', '.join(map(str, unknown))}")
        values = dict(data)
        values["actions"] = tuple(_action_from_dict(i, a) for i, a in enumerate(_sequence("actions",
                                                                                          values.get("actions", ()))))
        return cls(**values)

    def __reduce__(self):  # pickle (gathering trajectories across processes) and deepcopy: through plain data
        return (_outcome_from_dict, (self.to_dict(),))


def _outcome_from_dict(data: dict[str, Any]) -> EpisodeOutcome:
    return EpisodeOutcome.from_dict(data)


def _checked_bool(name: str, value: Any) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"episode outcome: {name} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def _sequence(name: str, value: Any) -> Sequence:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"episode outcome: {name} must be a list, got {type(value).__name__}")
    return value


def _mapping(name: str, value: Any) -> Mapping:
    if not isinstance(value, Mapping):
        raise ValueError(f"episode outcome: {name} must be a mapping (name -> value), got {type(value).__name__}")
    for key in value:
        if not isinstance(key, str):
            raise ValueError(f"episode outcome: {name} keys must be reward function names (str), got {key!r}")
    return value


def checked_component(name: str, amount: Any) -> float | None:
    """One reward component's value as a float (None: not applicable); a NaN, bool or non-number is a one-line
    ValueError naming the component (the outcome and the reward metrics and combination all check this way)."""
    if amount is None:
        return None
    if isinstance(amount, (bool, np.bool_)) or not isinstance(amount, numbers.Real) or math.isnan(amount):
        raise ValueError(f"reward component {name!r} must be a number or None, got {amount!r}")
    return float(amount)


def _checked_components(value: Any) -> dict[str, float | None]:
    """name -> float or None, each value checked by `checked_component`."""
    return {name: checked_component(name, amount) for name, amount in _mapping("reward_components", value).items()}


def _checked_errors(value: Any) -> dict[str, str]:
    errors = dict(_mapping("reward_errors", value))
    for name, message in errors.items():
        if not isinstance(message, str):
            raise ValueError(f"episode outcome: reward_errors[{name!r}] must be a str, got {type(message).__name__}")
    return errors


def _checked_problem_id(value: Any) -> str:
    """A str; an int id (a plain env's) is kept as its decimal text."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"episode outcome: problem_id must be a str, got {type(value).__name__} {value!r}")
    return str(value)


def _checked_answers(value: Any) -> tuple[str | None, ...]:
    answers = tuple(_sequence("turn_answers", value))
    for i, answer in enumerate(answers):
        if answer is not None and not isinstance(answer, str):
            raise ValueError(f"episode outcome: turn_answers[{i}] must be a str or None, got {answer!r}")
    return answers


def _action(value: Any) -> ActionRecord:
    if not isinstance(value, ActionRecord):
        raise ValueError(f"episode outcome: actions must be ActionRecords, got {type(value).__name__}")
    return value


def _action_from_dict(index: int, data: Any) -> ActionRecord:
    names = {f.name for f in fields(ActionRecord)}
    if not isinstance(data, Mapping) or not {"role", "text"} <= set(data) or set(data) - names:
        raise ValueError(f"outcome: actions[{index}] must be an object with role, text, injected_text and "
                         f"injected_role, got {str(data)[:80]}")
    return ActionRecord(**data)
