"""Shared fixtures: a tiny random model built in code (seconds on the CPU, no download)."""
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Idle OpenMP threads sleep instead of spinning: on a shared 2-core machine spinning threads made small
# matmuls about 100x slower. Set before torch starts its thread pool.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Byte-code caches written, whatever the environment says (PYTHONDONTWRITEBYTECODE=1 on the machine that runs CI):
# without them every Python process of the suite (each worker, subprocess, torchrun rank and spawned rank)
# compiled the package's modules again, and each worker rewrote the asserts of every test module (~17 s of a
# worker's collection, ~1 s of a subprocess's start). They go to __pycache__/ folders (.gitignore); site-packages
# has its own, from pip. Set before the test modules are collected; the subprocesses inherit it.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

import pytest  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))  # examples loaded by tests import their shared helpers (`common`)
os.environ.setdefault("WANDB_MODE", "disabled")
# The suite is made for 2 cores: one process uses both; under pytest-xdist (`-n 2`, .ci/run) each worker one.
torch.set_num_threads(max(1, 2 // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))

SHARED_DATA = ROOT.parent / "shared" / "data"


# A test file that starts processes, compiles or runs hypothesis: most of the suite's time is in these 35-odd files
# (1,126 of 1,643 worker seconds in a run of 2026-11-29), in runs of up to ~140 s (the two-rank launch) each.
HEAVY_FILE = re.compile(r"import subprocess|from subprocess|compile_layers\(|torch_compile=True|torch\.compile\(|"
                        r"from hypothesis")


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: ignored where it is not installed
def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist (`-n 2`), each test file runs whole on one worker (its module fixtures are made once,
    and a file may count what its own tests did), and the files with `TWO_RANK_JOBS` all on one worker (the
    session's one two-rank launch, tests/two_ranks.py). The heavy files (`HEAVY_FILE`) are handed out first, so the
    run ends on short files that even out the two workers' load: in xdist's order (most tests first) files of one
    or two long tests came last, one worker running them while the other waited. Only for `--dist load`."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadFileScheduling

    sources: dict[str, str] = {}

    def source(path: str) -> str:
        if path not in sources:
            file = Path(config.rootpath, path)
            sources[path] = file.read_text("utf-8") if file.is_file() else ""
        return sources[path]

    class FileScheduling(LoadFileScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            path = super()._split_scope(nodeid)
            return "two_rank_files" if "\nTWO_RANK_JOBS = " in source(path) else path

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the queue is built (most tests first): heavy files move ahead, in that order
                self.ordered = True
                queue = sorted(self.workqueue.items(),
                               key=lambda unit: not (unit[0] == "two_rank_files" or HEAVY_FILE.search(source(unit[0]))))
                self.workqueue.clear()
                self.workqueue.update(queue)
            super()._assign_work_unit(node)

    return FileScheduling(config, log)


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: the slow tier, out of the default run (tests/tiers.py; `-m slow` runs "
                                       "it, `-m ''` both tiers)")
    config.addinivalue_line("markers", "plots(*names): the test reads the PNG files a run draws when training ends, "
                                       "those named (e.g. 'metrics.png') or, with no name, all (without the mark, "
                                       "tests/conftest.py's `_plots_drawn_not_rendered` writes none)")


@pytest.hookimpl(tryfirst=True)  # before pytest's `-m` deselects by marks
def pytest_collection_modifyitems(config, items):
    """A test that needs the two-rank launch (`two_rank_jobs`, ~140 s of processes on a fast machine, 725 s on the
    CI machine kind) is in the slow tier (tests/tiers.py)."""
    for item in items:
        if "two_rank_jobs" in item.fixturenames:
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _plots_drawn_not_rendered(request, monkeypatch):
    """A run's end-of-training plots are drawn but neither laid out nor written (tests/unrendered_plots.py),
    unless the test is marked `plots`: all of them, or only the files its mark names (`plots("metrics.png")`)."""
    marker = request.node.get_closest_marker("plots")
    if marker is not None and not marker.args:
        return
    import lmgym.training.plots as plots
    from tests.unrendered_plots import drawn, rendered_only

    monkeypatch.setattr(plots, "plot_metrics", drawn if marker is None else rendered_only(marker.args))


@pytest.fixture
def tiny_policy():
    from lmgym.policies import HFPolicy, build_tiny_model, build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    return HFPolicy(build_tiny_model(tok, seed=0), tok, device="cpu")


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is not present")
    return SHARED_DATA


@pytest.fixture
def gsm8k_train(shared_data) -> str:
    """The path of ../shared/data's GSM8K train file, as a str (a command-line argument); skips without it."""
    path = shared_data / "gsm8k" / "train.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} is not present")
    return str(path)


@pytest.fixture(scope="session")
def two_rank_jobs(request, tmp_path_factory):
    """Every two-rank job (`TWO_RANK_JOBS`) of the collected modules that use this fixture, run in one launch of
    two gloo processes (tests/two_ranks.py); `.folder(name)` is a job's results, or fails with its error."""
    from tests.two_ranks import launch

    modules = {}
    for item in request.session.items:
        if "two_rank_jobs" in item.fixturenames:
            modules.setdefault(item.module.__name__, item.module)
    jobs = tuple(job for module in modules.values() for job in module.TWO_RANK_JOBS)
    names = [job.name for job in jobs]
    assert len(names) == len(set(names)), f"two-rank job names repeat: {names}"
    return launch(tmp_path_factory.mktemp("two_ranks"), jobs)


def _process_settings() -> list[tuple[str, Callable[[], Any], Callable[[Any], Any]]]:
    """(name, read, put back) of each process-wide setting a test may change and must put back: a leftover one
    changes what later tests in the same worker see (a recursion limit raised and left made the grading worker,
    forked later, accept a parse it refuses under the default, so a CI verdict depended on which test ran first)."""
    import gc

    return [("sys.getrecursionlimit()", sys.getrecursionlimit, sys.setrecursionlimit),
            ("torch.get_default_dtype()", torch.get_default_dtype, torch.set_default_dtype),
            ("torch.get_num_threads()", torch.get_num_threads, torch.set_num_threads),
            ("torch.is_grad_enabled()", torch.is_grad_enabled, torch.set_grad_enabled),
            ("torch.are_deterministic_algorithms_enabled()", torch.are_deterministic_algorithms_enabled,
             torch.use_deterministic_algorithms),
            ("gc.get_threshold()", gc.get_threshold, lambda thresholds: gc.set_threshold(*thresholds)),
            ("gc.isenabled()", gc.isenabled, lambda enabled: (gc.enable if enabled else gc.disable)())]


@pytest.fixture(autouse=True)
def _process_state_left_as_found():
    """Fail a test that leaves a process-wide setting changed (`_process_settings`), after putting it back."""
    settings = _process_settings()
    before = [read() for _, read, _ in settings]
    yield
    changed = []
    for (name, read, put_back), value in zip(settings, before):
        now = read()
        if now != value:
            put_back(value)
            changed.append(f"{name}: {value} -> {now}")
    if changed:
        pytest.fail("the test left process-wide settings changed (put back now): " + "; ".join(changed))
