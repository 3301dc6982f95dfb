"""A config's settable names, a nested config's fields dotted (`mcts.simulations`), for the edges that
speak in flat names: config files (`mcts: {simulations: 24}` flattens to `mcts.simulations`), the
command line (`--mcts.simulations 24`) and the config reference table."""
from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lmgym.core.checked_config import (
    CheckedConfig,
    ConfigError,
    coerce_field,
    field_default,
    field_help,
    field_types,
    nested_fields,
)

__all__ = ["Setting", "settings_of", "flatten", "unflatten", "coerce_setting"]


@dataclass(frozen=True)
class Setting:
    """One settable value of a config: `name` ("seed", "mcts.simulations") is field `field` of `owner`."""

    name: str
    owner: type
    field: str
    kind: Any
    default: Any  # dataclasses.MISSING when the field has none

    @property
    def help(self) -> str:
        return field_help(self.owner, self.field)


@functools.cache
def settings_of(cls: type) -> dict[str, Setting]:
    """Every settable name of `cls` in field order: its own fields, each nested config's fields dotted in place of
    the nested field (with the outer config's default for it; fields it passes down left out)."""
    return {s.name: s for s in _settings(cls, "", None, ())}


def _settings(cls: type, prefix: str, instance: Any, skipped: tuple[str, ...]) -> list[Setting]:
    found = []
    for f in dataclasses.fields(cls):
        if f.name in skipped:
            continue
        default = getattr(instance, f.name) if instance is not None else field_default(cls, f.name)
        kind = field_types(cls)[f.name]
        if f.name in nested_fields(cls):
            inner = kind() if default is dataclasses.MISSING else default
            found += _settings(kind, f"{prefix}{f.name}.", inner, cls.passed_down.get(f.name, ()))
        else:
            found.append(Setting(prefix + f.name, cls, f.name, kind, default))
    return found


def flatten(cls: type, values: Mapping) -> dict[Any, Any]:
    """`values` with each nested config given as a mapping (or a config) spelled as dotted names:
    {"mcts": {"simulations": 24}} -> {"mcts.simulations": 24}. Other keys stay as they are."""
    flat: dict[Any, Any] = {}
    nested = nested_fields(cls)
    for key, value in values.items():
        if key in nested and isinstance(value, (Mapping, CheckedConfig)):
            if isinstance(value, CheckedConfig):  # a built config: the fields it reads
                value = {k: v for k, v in value.to_dict().items() if k not in cls.passed_down.get(key, ())}
            flat.update({f"{key}.{name}": v for name, v in flatten(nested[key], value).items()})
        else:
            flat[key] = value
    return flat


def unflatten(values: Mapping) -> dict[Any, Any]:
    """Dotted names back into nested mappings: {"mcts.simulations": 24} -> {"mcts": {"simulations": 24}}."""
    nested: dict[Any, Any] = {}
    for key, value in values.items():
        *path, last = key.split(".") if isinstance(key, str) else [key]
        level = nested
        for part in path:
            level = level.setdefault(part, {})
            if not isinstance(level, dict):  # "mcts: 5" and "mcts.x" both given: the bad value is reported
                break
        else:
            level[last] = value
    return nested


def coerce_setting(cls: type, name: str, value: Any) -> Any:
    """`value` as setting `name` (dotted or not) of `cls` declares it; a ConfigError named from `cls` otherwise."""
    if name in field_types(cls):
        return coerce_field(cls, name, value)
    setting = settings_of(cls)[name]
    try:
        return coerce_field(setting.owner, setting.field, value)
    except ConfigError as err:
        raise ConfigError.of_field(cls.__name__, name, err.detail) from None
