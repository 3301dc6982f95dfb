"""`CheckedConfig`: the base of every config dataclass in the toolkit.

A config is a `@dataclass` subclass of `CheckedConfig` whose fields are declared with `setting(default,
help)`. Building one coerces every field to its declared type (`lmgym.core.coercion`: YAML's and flags'
strings, ints for floats, quoted booleans, lists for tuples, `X | None`); a field whose type is another
config takes that config or a mapping of its fields, merged into the field's default
(`mcts={"simulations": 24}` changes `simulations` only). A subclass's `__post_init__` calls
`super().__post_init__()` and then checks its ranges with `self.require(name, condition, expectation)`.
Every bad value is a one-line `ConfigError`: "<Class>.<field> must be <expectation>, got <value>"; a
nested config's error is named from the outer one ("MCTSSearchConfig.mcts.simulations must be ...").
A keyword that is not a field is refused in one line too (`refusal` may say what to write instead).
"""
from __future__ import annotations

import copy
import dataclasses
import functools
import typing
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from lmgym.core.coercion import Mismatch, coerce, shown
from lmgym.core.messages import did_you_mean

__all__ = ["CheckedConfig", "ConfigError", "UnknownFieldError", "setting", "field_help", "field_types",
           "field_default", "nested_fields", "coerce_field", "merged", "unknown_fields_line"]


class ConfigError(ValueError):
    """A configuration value is invalid. The message is one line; `field` names the field when there is one
    (dotted for a nested config's field: "mcts.simulations")."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(" ".join(str(message).split()))
        self.field = field
        self.owner: str | None = None   # set by of_field: the config class named in the message
        self.detail: str | None = None  # set by of_field: what follows "<owner>.<field> "

    @classmethod
    def of_field(cls, owner: str, field: str, detail: str) -> ConfigError:
        """The error "<owner>.<field> <detail>" ("GRPOConfig.top_p must be in (0, 1], got 2.0")."""
        error = cls(f"{owner}.{field} {detail}", field)
        error.owner, error.detail = owner, detail
        return error

    def inside(self, owner: str, name: str) -> ConfigError:
        """This error of the config held in field `name` of the config class `owner`, named from `owner`."""
        if self.detail is not None and self.field is not None:
            return ConfigError.of_field(owner, f"{name}.{self.field}", self.detail)
        return ConfigError(f"{owner}.{name}: {self}", f"{name}.{self.field}" if self.field else name)


class UnknownFieldError(ConfigError, TypeError):
    """A keyword that is not a field of the config (a TypeError too, as Python's own would be)."""


def setting(default: Any, help: str) -> Any:
    """A dataclass field with its one-line help text (shown by `--help` and in the config reference).

    A mutable default (a list, a nested config) gives every instance its own copy."""
    if type(default).__hash__ is None:
        return dataclasses.field(default_factory=functools.partial(copy.deepcopy, default), metadata={"help": help})
    return dataclasses.field(default=default, metadata={"help": help})


def field_help(cls: type, name: str) -> str:
    """The help text of field `name`: its own, else that of the nearest base class declaring it."""
    for klass in cls.__mro__:
        f = getattr(klass, "__dataclass_fields__", {}).get(name)
        if f is not None and f.metadata.get("help"):
            return f.metadata["help"]
    return ""


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """Declared type of each dataclass field of `cls` (string annotations resolved)."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(cls)}


def field_default(cls: type, name: str) -> Any:
    """The default of field `name` of `cls` (a fresh one for a default factory); `dataclasses.MISSING` if none."""
    f = cls.__dataclass_fields__[name]
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def is_config_class(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, CheckedConfig)


@functools.cache
def nested_fields(cls: type) -> dict[str, type]:
    """The fields of `cls` that hold another config: {name: its config class}."""
    return {name: kind for name, kind in field_types(cls).items() if is_config_class(kind)}


def coerce_field(cls: type, name: str, value: Any) -> Any:
    """`value` as field `name` of `cls` declares it; a ConfigError naming the field and value otherwise.
    A nested config's field takes the config or a mapping of its fields (returned as it is)."""
    kind = field_types(cls)[name]
    if is_config_class(kind):
        if isinstance(value, (kind, Mapping)):
            return value
        raise ConfigError.of_field(cls.__name__, name,
                                   f"expects a mapping of {kind.__name__} fields, got {shown(value)}")
    try:
        return coerce(kind, value)
    except Mismatch as expected:
        raise ConfigError.of_field(cls.__name__, name, f"expects {expected}, got {shown(value)}") from None


def unknown_fields_line(owner: str, unknown: list[Any], known: Iterable[str]) -> str:
    """The line refusing `unknown` names, each followed by the close `known` ones:
    "unknown GRPOConfig field(s): 1, learning_rat (did you mean learning_rate?)"."""
    names = ", ".join(str(name) + did_you_mean(str(name), known) for name in unknown)
    return f"unknown {owner} field(s): {names}"


def merged(config: CheckedConfig, changes: Mapping) -> CheckedConfig:
    """`config` with the fields `changes` names replaced (checked again); a mapping given for a nested config
    is merged into that config the same way."""
    cls, values = type(config), dict(changes)
    for name in nested_fields(cls).keys() & values.keys():
        if isinstance(values[name], Mapping):
            try:
                values[name] = merged(getattr(config, name), values[name])
            except ConfigError as err:
                raise err.inside(cls.__name__, name) from None
    return dataclasses.replace(config, **values)


class CheckedConfig:
    """Base of the config dataclasses: coercion, `require`, `to_dict`, field help (see the module docstring).

    `passed_down` names, per nested config field, the fields of this config that the nested one takes
    instead of its own (MCTSSearchConfig: {"mcts": ("temperature", "max_new_tokens")}): those nested fields
    are not read, so they get no flag, no row in the reference, no entry in `to_dict`, and setting them from
    a mapping, a file or a flag is refused.
    """

    passed_down: ClassVar[dict[str, tuple[str, ...]]] = {}

    def __new__(cls, *args: Any, **kwargs: Any):
        if kwargs:
            fields = field_types(cls)
            unknown = [name for name in kwargs if name not in fields]
            if unknown:
                advice = next((line for line in map(cls.refusal, unknown) if line), None)
                raise UnknownFieldError(advice or unknown_fields_line(cls.__name__, unknown, fields), str(unknown[0]))
        return super().__new__(cls)

    def __post_init__(self) -> None:
        cls = type(self)
        nested = nested_fields(cls)
        for name in field_types(cls):
            value = coerce_field(cls, name, getattr(self, name))
            if name in nested and isinstance(value, Mapping):
                value = self._nested_from_mapping(name, value)
            object.__setattr__(self, name, value)  # frozen configs too

    def _nested_from_mapping(self, name: str, values: Mapping) -> CheckedConfig:
        cls = type(self)
        for key in values:
            if key in self.passed_down.get(name, ()):
                raise ConfigError(cls.refusal(f"{name}.{key}"), f"{name}.{key}")
        default = field_default(cls, name)
        try:
            return merged(nested_fields(cls)[name]() if default is dataclasses.MISSING else default, values)
        except ConfigError as err:
            raise err.inside(cls.__name__, name) from None

    @classmethod
    def refusal(cls, name: Any) -> str | None:
        """Why `name`, not a field of `cls`, is refused, when there is more to say than "unknown": an old flat
        spelling of a nested field (`mcts_simulations` -> `mcts.simulations`) or a nested field this config
        passes down. Subclasses add their own (TRL's names)."""
        if not isinstance(name, str):
            return None
        for outer, kind in nested_fields(cls).items():
            dotted = name.startswith(outer + ".")
            sub = name[len(outer) + 1:] if dotted or name.startswith(outer + "_") else None
            if sub is None or sub not in field_types(kind):
                continue
            if sub in cls.passed_down.get(outer, ()):
                return (f"{cls.__name__}: {outer}.{sub} is not read: {outer} takes this config's own {sub}; "
                        f"set {sub}")
            if not dotted:
                return (f"{cls.__name__}: {name} is now {outer}.{sub} (YAML: `{outer}: {{{sub}: ...}}`; flag: "
                        f"--{outer}.{sub}; Python: {outer}={kind.__name__}({sub}=...))")
        return None

    def require(self, name: str, condition: bool, expectation: str) -> None:
        """Raise `ConfigError("<Class>.<name> must be <expectation>, got <value>")` unless `condition`."""
        if not condition:
            raise ConfigError.of_field(type(self).__name__, name,
                                       f"must be {expectation}, got {shown(getattr(self, name))}")

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain values, a nested config as a dict of its fields (less those passed down): what
        a run's config.json holds, and what `type(self)(**to_dict())` rebuilds."""
        values = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, CheckedConfig):
                skipped = self.passed_down.get(f.name, ())
                values[f.name] = {k: v for k, v in value.to_dict().items() if k not in skipped}
            else:
                values[f.name] = copy.deepcopy(value)
        return values
