"""0.2.0's top-level names (`envs`, `training`, ...) moved under `lmgym` in 0.3.0. For one release the old paths
still import, as the same module objects, with one MovedModuleWarning line naming the new path."""
import importlib
import subprocess
import sys

import pytest

from lmgym.moved import MOVED, OLD_PACKAGES, MovedModuleWarning, new_path
from tests.tiers import slow


def forget_old(name: str) -> None:
    for loaded in [key for key in sys.modules if key == name or key.startswith(name + ".")]:
        sys.modules.pop(loaded)


def fresh_import(name: str):
    forget_old(name)
    return importlib.import_module(name)


@pytest.mark.parametrize("old", OLD_PACKAGES)
def test_every_old_top_level_name_warns_and_is_the_new_package(old):
    with pytest.warns(MovedModuleWarning, match=rf"^{old} moved to lmgym\.{old}; import it from there"):
        module = fresh_import(old)
    assert module is importlib.import_module(f"lmgym.{old}")


def test_submodules_and_names_import_through_an_old_path():
    forget_old("training")
    forget_old("traindata")
    with pytest.warns(MovedModuleWarning, match="^training moved to lmgym.training"):
        from training.trainer import Trainer  # noqa: F401 - the old spelling under test
    from lmgym.training.trainer import Trainer as new_trainer
    assert Trainer is new_trainer
    assert sys.modules["training.trainer"] is sys.modules["lmgym.training.trainer"]
    with pytest.warns(MovedModuleWarning, match="^traindata moved to lmgym.traindata"):
        shepherd = importlib.import_module("traindata.step_data.shepherd")
    assert shepherd is importlib.import_module("lmgym.traindata.step_data.shepherd")


def test_the_longest_moved_prefix_decides():
    assert new_path("envs.math") == "lmgym.envs.math"
    assert new_path("numpy.linalg") is None
    for old, new in MOVED.items():
        assert new_path(old) == new


def test_a_path_that_never_existed_is_still_an_import_error():
    with pytest.warns(MovedModuleWarning):
        fresh_import("algorithms")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("algorithms.no_such_module")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("lmgym.no_such_module")


@slow
def test_a_fresh_process_prints_one_warning_line_for_an_old_import(tmp_path):
    code = "from envs import make\nimport envs.math\nprint(make('Arithmetic-v0').__class__.__module__)"
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "lmgym.envs.arithmetic"
    warnings = [line for line in result.stderr.splitlines() if "MovedModuleWarning" in line]
    assert warnings == [warnings[0]] and "envs moved to lmgym.envs" in warnings[0], result.stderr


def test_measuring_moved_to_evaluation_and_the_old_paths_and_names_still_work():
    import lmgym
    import lmgym.evaluation as evaluation

    for old in ("lmgym.search.evaluate", "lmgym.algorithms.reflection_plots", "lmgym.training.tool_errors"):
        forget_old(old)
        with pytest.warns(MovedModuleWarning, match=rf"^{old} moved to {MOVED[old]}"):
            module = importlib.import_module(old)
        assert module is importlib.import_module(MOVED[old])
    from lmgym.algorithms import plot_turn_accuracy, verifier_metrics
    from lmgym.search import evaluate, evaluate_curves

    assert (evaluate, evaluate_curves) == (evaluation.evaluate, evaluation.evaluate_curves)
    assert (plot_turn_accuracy, verifier_metrics) == (evaluation.plot_turn_accuracy, evaluation.verifier_metrics)
    assert lmgym.evaluate is evaluation.evaluate and lmgym.pass_at_k is evaluation.pass_at_k
    with pytest.raises(AttributeError):
        _ = importlib.import_module("lmgym.search").no_such_name


def test_an_old_module_path_leaves_the_name_its_package_exports():
    """`lmgym.search.evaluate` was both a module and the function the package exported; importing the old module
    path keeps the package's name the function (as before the move), and a module path without such a name is
    reachable as an attribute as usual."""
    import lmgym.algorithms
    import lmgym.evaluation as evaluation

    for old in ("lmgym.search.evaluate", "lmgym.search.curves", "lmgym.algorithms.reflection_metrics"):
        forget_old(old)
    with pytest.warns(MovedModuleWarning):
        import lmgym.algorithms.reflection_metrics  # noqa: F401
        import lmgym.search.curves
        import lmgym.search.evaluate  # noqa: F401 - the old module path under test
    from lmgym.search import evaluate

    assert evaluate is evaluation.evaluate
    assert lmgym.algorithms.reflection_metrics is evaluation.reflection_metrics
    assert lmgym.search.curves.evaluate_curves is evaluation.evaluate_curves
    assert sys.modules["lmgym.search.evaluate"] is sys.modules["lmgym.evaluation.evaluate"]
