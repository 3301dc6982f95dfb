"""A package's names that load their module on first use (PEP 562 `__getattr__` and `__dir__`), so that
importing the package stays light."""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(package: str, lazy: Mapping[str, str],
               namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of package `package` whose globals are `namespace`: a name in `lazy`
    (name -> the module that defines it) is imported on first access and kept in `namespace`."""

    def __getattr__(name: str) -> Any:
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(lazy))

    return __getattr__, __dir__
