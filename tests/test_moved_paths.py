"""Modules that left `algorithms/` and `envs/` in 0.2.0 still import from their old paths, as the same module
object, with one MovedModuleWarning/FutureWarning line naming the new path."""
import importlib
import sys

import pytest

from algorithms.moved import MOVED, MovedModuleWarning


def fresh_import(name: str):
    sys.modules.pop(name, None)
    return importlib.import_module(name)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_old_algorithms_path_warns_and_is_the_new_module(old):
    with pytest.warns(MovedModuleWarning, match=rf"^algorithms\.{old} moved to {MOVED[old]}; import it from there"):
        module = fresh_import(f"algorithms.{old}")
    assert module is importlib.import_module(MOVED[old])


def test_names_import_through_an_old_path_and_submodules_of_a_moved_package_too():
    sys.modules.pop("algorithms.trainer", None)
    with pytest.warns(MovedModuleWarning):
        from algorithms.trainer import Trainer
    from training import Trainer as moved_here
    assert Trainer is moved_here
    with pytest.warns(MovedModuleWarning, match="algorithms.step_data.shepherd moved to traindata.step_data.shepherd"):
        shepherd = fresh_import("algorithms.step_data.shepherd")
    assert shepherd is importlib.import_module("traindata.step_data.shepherd")


@pytest.mark.parametrize("old,new", [("envs.jsonl", "core.jsonl"), ("envs.messages", "core.messages")])
def test_envs_modules_that_moved_to_core_warn(old, new):
    with pytest.warns(FutureWarning, match=rf"^{old} moved to {new}"):
        module = fresh_import(old)
    assert module is importlib.import_module(new)


def test_a_path_that_never_existed_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("algorithms.no_such_module")


def test_names_the_old_algorithms_package_exported_still_import_with_a_warning():
    import algorithms
    from algorithms.moved import MOVED_NAMES

    for name, package in MOVED_NAMES.items():
        if name in vars(algorithms):  # a submodule alias of the same name imported earlier in this process
            continue
        with pytest.warns(MovedModuleWarning, match=rf"^algorithms\.{name} moved to {package}\.{name}"):
            value = getattr(algorithms, name)
        assert value is getattr(importlib.import_module(package), name)
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchName'"):
        algorithms.NoSuchName
