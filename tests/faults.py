"""Fault injection for the kill-and-resume tests, from the test side: the library makes no such calls.

The library's small file-operation functions (and `os.unlink`/`os.rmdir` where `remove_tree` empties a
folder) are patched, wherever a module holds them, by wrappers that count arrivals at named points and
kill the process at the armed one, as a power cut or `kill -9` would at that exact boundary. A point is
armed as "<point>:<n>": its n-th arrival (1-based) dies.

    config.before_replace, config.after_replace      <run>/config.json rewritten (atomic_write_text)
    truncate.side_file                               rows set aside in metrics.discarded.jsonl
    truncate.before_replace, truncate.after_replace  metrics.jsonl rewritten by truncate_after
    atomic_write.before_replace, ...after_replace    any other file atomic_write_text rewrites
    metrics.write                                    a torn metrics line: its first half on disk, then the kill
    metrics.written                                  a metrics line appended and flushed
    save.<file>                                      a checkpoint file written and flushed (save.model.safetensors)
    save.manifest                                    MANIFEST.json written in the checkpoint's temporary folder
    save.renamed                                     the checkpoint folder renamed into place
    save.pruned                                      an old checkpoint (or a leftover) removed while pruning
    archive.moved                                    an entry of an earlier run moved aside as *.bak
    remove.renamed                                   a folder being removed renamed to .trash-<name>
    remove.file                                      a file or subfolder of that .trash- folder deleted

Two ways in: the `crash_at` fixture (in this process; the kill raises `Killed`, which no library code
catches; a test module imports `crash_at_fixture` to use it) and `arm_sigkill` (in a forked child of
tests/kill_harness.py: a real SIGKILL).
"""
from __future__ import annotations

import importlib
import os
import signal
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
REPLACED = {"config.json": "config", "metrics.jsonl": "truncate"}  # files atomic_write_text rewrites
APPENDED_AFTER = {"metrics.jsonl": "metrics.written", "metrics.discarded.jsonl": "truncate.side_file"}


class Killed(BaseException):
    """Stands in for SIGKILL inside this process (the files as they are then are what a kill leaves)."""


@dataclass(frozen=True)
class Seam:
    """Points around calls of `owner.function`: `point(caller, args)` names the point a call reaches
    (caller: "module.function" of the calling code), or None. `when`: "before" the call, "after" it, or
    "torn" (instead of the call, which must be `append_synced(path, text)`: half the text, then the kill)."""

    owner: str
    function: str
    when: str
    point: Callable[[str, tuple], str | None]


def _replaced(suffix: str) -> Callable[[str, tuple], str]:
    return lambda caller, args: f"{REPLACED.get(Path(args[1]).name, 'atomic_write')}.{suffix}"


def _called_from(caller_name: str, point: str) -> Callable[[str, tuple], str | None]:
    return lambda caller, args: point if caller == caller_name else None


SEAMS = (
    Seam("lmgym.core.atomic_io", "replace_durably", "before", _replaced("before_replace")),
    Seam("lmgym.core.atomic_io", "replace_durably", "after", _replaced("after_replace")),
    Seam("lmgym.core.atomic_io", "append_synced", "torn",
         lambda caller, args: "metrics.write" if Path(args[0]).name == "metrics.jsonl" else None),
    Seam("lmgym.core.atomic_io", "append_synced", "after", lambda caller, args: APPENDED_AFTER.get(Path(args[0]).name)),
    Seam("lmgym.core.atomic_io", "fsync_file", "after",
         lambda caller, args: (f"save.{Path(args[0]).name}"
                               if caller == "lmgym.training.checkpoints.folders.write_files" else None)),
    Seam("lmgym.training.checkpoints.folders", "write_manifest", "after", lambda caller, args: "save.manifest"),
    Seam("lmgym.training.checkpoints.folders", "move_into_place", "after", lambda caller, args: "save.renamed"),
    Seam("lmgym.core.atomic_io", "remove_tree", "after",
         _called_from("lmgym.training.checkpoints.folders.prune", "save.pruned")),
    Seam("lmgym.core.atomic_io", "move_aside", "after",
         lambda caller, args: {"lmgym.training.run_logger.archive_history": "archive.moved",
                               "lmgym.core.atomic_io.remove_tree": "remove.renamed"}.get(caller)),
    Seam("os", "unlink", "after", _called_from("lmgym.core.atomic_io._delete_folder", "remove.file")),
    Seam("os", "rmdir", "after", _called_from("lmgym.core.atomic_io._delete_folder", "remove.file")),
)
POINTS = ("config.before_replace", "config.after_replace", "truncate.side_file", "truncate.before_replace",
          "truncate.after_replace", "atomic_write.before_replace", "atomic_write.after_replace", "metrics.write",
          "metrics.written", "save.manifest", "save.renamed", "save.pruned", "archive.moved", "remove.renamed",
          "remove.file")  # and save.<file name>.<extension> (save.model.safetensors)


def parse_spec(spec: str) -> tuple[str, int]:
    """("<point>", n) from "<point>:<n>"; a ValueError naming the problem for an unknown point or a bad n."""
    point, _, count = spec.rpartition(":")
    if point not in POINTS and not (point.startswith("save.") and "." in point[len("save."):]):
        raise ValueError(f"unknown crash point {point!r} in {spec!r}: expected one of {', '.join(POINTS)} "
                         f"or save.<file name>.<extension>")
    if not count.isdigit() or int(count) < 1:
        raise ValueError(f"crash point {spec!r}: the arrival to die at must be an integer >= 1")
    return point, int(count)


class FaultInjector:
    """Counts arrivals at the armed point (none until `arm`) and calls `die` at the chosen one."""

    def __init__(self, die: Callable[[], None]) -> None:
        self.die = die
        self.point: str | None = None
        self.count = 0
        self.seen = 0

    def arm(self, spec: str | None) -> None:
        """Die at the arrival `spec` ("<point>:<n>") names, counting from now; None disarms."""
        self.point, self.count = parse_spec(spec) if spec is not None else (None, 0)
        self.seen = 0

    def arrive(self, point: str | None) -> bool:
        """Count one arrival at `point`; True when it is the armed one."""
        if point is None or point != self.point:
            return False
        self.seen += 1
        return self.seen == self.count

    def install(self, set_attribute: Callable[[Any, str, Any], None] = setattr) -> None:
        """Put a counting wrapper in place of each seam's function, in its own module and in every module of
        this repository that imported it by name (`set_attribute`: setattr, or monkeypatch.setattr)."""
        targets = dict.fromkeys((s.owner, s.function) for s in SEAMS)
        owners = {owner: importlib.import_module(owner) for owner, _ in targets}
        wrappers = {}  # id(original) -> (its owner module, its wrapper)
        for owner, function in targets:
            original = getattr(owners[owner], function)
            wrapper = self._wrapper(original, [s for s in SEAMS if (s.owner, s.function) == (owner, function)])
            wrappers[id(original)] = (owners[owner], wrapper)
            set_attribute(owners[owner], function, wrapper)
        for module in _repository_modules():  # each module's names read once: a by-name import of an original
            for name, value in list(vars(module).items()):
                found = wrappers.get(id(_unwrapped(value)))
                if found is not None and module is not found[0]:
                    set_attribute(module, name, found[1])

    def _wrapper(self, original: Callable, seams: list[Seam]) -> Callable:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if self.point is None:
                return original(*args, **kwargs)
            frame = sys._getframe(1)
            caller = f"{frame.f_globals.get('__name__')}.{frame.f_code.co_name}"
            for seam in seams:
                if seam.when in ("before", "torn") and self.arrive(seam.point(caller, args)):
                    if seam.when == "torn":
                        _append_half(*args)
                    self.die()
            result = original(*args, **kwargs)
            for seam in seams:
                if seam.when == "after" and self.arrive(seam.point(caller, args)):
                    self.die()
            return result

        counted.fault_injection_of = original  # type: ignore[attr-defined]
        return counted


def _unwrapped(value: Any) -> Any:
    """The original function behind an injector's wrapper left in a module first imported while an earlier
    `crash_at` was installed (such a one is replaced too, so that this injector counts its calls); else `value`.
    `type(...) is`, not isinstance: isinstance reads __class__, which warns on deprecated torch objects."""
    if type(value) is types.FunctionType:
        return value.__dict__.get("fault_injection_of", value)
    return value


def _ours(path: Path) -> bool:
    """A file of this repository's own code: under ROOT but not in an environment installed there (.venv's
    site-packages hold thousands of modules, none of which holds the library's functions by name)."""
    return path.is_relative_to(ROOT) and "site-packages" not in path.parts


def _repository_modules() -> list[Any]:
    """The imported modules whose files lie in this repository (the library, the tests, the examples)."""
    found = []
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        # "site-packages" first, on the string: resolving the path of each of torch's and transformers' thousands
        # of modules took ~6 s of every `crash_at` on the CI machine kind
        if path and "site-packages" not in path and _ours(Path(path).resolve()):
            found.append(module)
    return found


def _append_half(path: str | os.PathLike, text: str) -> None:
    """What a kill inside `append_synced` leaves: the first half of `text` on disk."""
    with open(path, "a") as fh:
        fh.write(text[: len(text) // 2])
        fh.flush()
        os.fsync(fh.fileno())


def _sigkill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _raise_killed() -> None:
    raise Killed()


def arm_sigkill(spec: str) -> FaultInjector:
    """Patch this process for good and SIGKILL it at `spec` ("<point>:<n>"): for a forked training attempt."""
    injector = FaultInjector(_sigkill)
    injector.install()
    injector.arm(spec)
    return injector


@pytest.fixture(name="crash_at")
def crash_at_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str | None], None]]:
    """`crash_at("<point>:<n>")` arms a point in this process (counting from then on); reaching it raises
    Killed. `crash_at(None)` disarms. The patches are undone after the test, and the injector disarmed (a
    module first imported during the test keeps a wrapper, which then only passes calls through)."""
    injector = FaultInjector(_raise_killed)
    injector.install(monkeypatch.setattr)
    yield injector.arm
    injector.arm(None)
