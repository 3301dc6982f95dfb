"""The package layers hold: import-linter's `lint-imports` checks the contracts of .importlinter (each library
package imports only those below it; no import circles inside a package).

Expected to fail on a branch without the config task (issue 22's one checked-config base), which removes the
last circle, lmgym.training.trl_names <-> lmgym.training.config; it passes once that task is merged."""
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def test_every_import_contract_is_kept():
    result = subprocess.run([sys.executable, "-c", LINT, "--config", str(ROOT / ".importlinter"), "--no-cache"],
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert re.search(r"Contracts: [1-9]\d* kept, 0 broken\.", result.stdout), result.stdout[-3000:]


def import_cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module in `graph`'s module-level imports (Tarjan)."""
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in edges[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycle_between_any_two_library_files():
    """Beyond the contracts (layers between packages, acyclic siblings inside one): no chain of imports leads
    from any module of lmgym back to itself, subpackages and package `__init__`s included."""
    import grimp

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        graph = grimp.build_graph("lmgym", cache_dir=None)
    finally:
        sys.setrecursionlimit(limit)  # a raised limit left behind changed what the next tests' processes could parse
    assert len(graph.modules) > 150
    assert import_cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    class Graph:  # a -> b -> c -> a, and d alone
        modules = {"a", "b", "c", "d"}

        def find_modules_directly_imported_by(self, module):
            return {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}[module]

    assert import_cycles(Graph()) == [["a", "b", "c"]]
