"""The search methods, in one registry: `SearchSettings` validates `method` against it, `run_search` runs
from it, the search CLI (examples/search_eval.py) and the server (/solve, /health and the OpenAI routes'
`search` field) list and check methods from it. Adding a method is one `register_search_method` call:

    register_search_method("first_of_n", my_search, budget="n", label=lambda s: f"first_of_{s.n}")

A method's search function takes `(policy, env, starts, settings, scorer, generator)` and returns one
`SearchResult` per start, as `run_search` does (`lmgym.search.search`).
"""
from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SearchFn = Callable[..., list]  # (policy, env, starts, settings, scorer, generator) -> list[SearchResult]
Label = Callable[[Any], str]  # of a SearchSettings (settings.py imports this module, so it is not named here)


@dataclass(frozen=True)
class SearchMethod:
    """One search method: how it runs and what the config, the CLI and the server need to know of it.

    Args:
        name: what `SearchSettings.method` holds.
        run: the search function, or a lazy "module:function" string (imported on first run).
        needs_scorer: whether it needs a step scorer (a PRM): without one, run_search refuses it in one line
            and the server leaves it out.
        budget: the `SearchSettings` field (dotted for a nested one, "mcts.simulations") that a budget sets:
            the server's /solve `budget` and the OpenAI route's `search.n`; None: the method has no budget.
        label: the settings' short name with the budget (`maj@8`, `best_of_8`); None: `{name}@{budget}`, or the
            name when it has no budget.
        shape: its name under a token cap, before `@<cap>tok` (beam: `beam_4x2`); None: the name.
    """

    name: str
    run: SearchFn | str
    needs_scorer: bool = False
    budget: str | None = None
    label: Label | None = None
    shape: Label | None = None

    def search_fn(self) -> SearchFn:
        """The search function (a "module:function" string is imported here)."""
        if callable(self.run):
            return self.run
        module, _, function = self.run.partition(":")
        return getattr(importlib.import_module(module), function)

    def with_budget(self, settings: Any, budget: int) -> Any:
        """`settings` with this method and its budget field set to `budget` (no budget: only the method)."""
        settings = dataclasses.replace(settings, method=self.name)
        return settings if self.budget is None else _replaced(settings, self.budget.split("."), budget)

    def label_of(self, settings: Any) -> str:
        """The short name of `settings` (this method's): its label, or with max_tokens `{shape}@{cap}tok`; a
        named verifier follows the name in brackets (best_of_8[critic], best_of_n[critic]@300tok)."""
        named = f"[{settings.verifier}]" if getattr(settings, "verifier", None) else ""
        if settings.max_tokens is not None:
            return f"{self.shape(settings) if self.shape else self.name}{named}@{settings.max_tokens}tok"
        if self.label is not None:
            return self.label(settings) + named
        if self.budget is None:
            return self.name + named
        return f"{self.name}{named}@{_field(settings, self.budget.split('.'))}"


_METHODS: dict[str, SearchMethod] = {}


def register_search_method(name: str, run: SearchFn | str, *, needs_scorer: bool = False, budget: str | None = None,
                           label: Label | None = None, shape: Label | None = None) -> SearchMethod:
    """Register (or replace) the search method `name`; the config, the CLI and the server accept it at once."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a search method's name must be an identifier (a-z, 0-9, _); got {name!r}")
    if not (callable(run) or (isinstance(run, str) and ":" in run)):
        raise ValueError(f"search method {name!r}: run must be a function or a 'module:function' string; got {run!r}")
    method = SearchMethod(name, run, needs_scorer, budget, label, shape)
    _METHODS[name] = method
    return method


def unregister_search_method(name: str) -> None:
    """Remove the search method `name` (a KeyError naming it when it is not registered)."""
    if name not in _METHODS:
        raise KeyError(f"no search method {name!r} is registered")
    del _METHODS[name]


def search_methods() -> dict[str, SearchMethod]:
    """name -> SearchMethod of every registered method, in registration order (a copy)."""
    return dict(_METHODS)


def search_method(name: str) -> SearchMethod:
    """The registered method `name`; a one-line ValueError listing the registered ones otherwise."""
    if name not in _METHODS:
        raise ValueError(f"unknown search method {name!r}; registered: {' | '.join(_METHODS)}")
    return _METHODS[name]


def _field(settings: Any, path: list[str]) -> Any:
    for part in path:
        settings = getattr(settings, part)
    return settings


def _replaced(settings: Any, path: list[str], value: Any) -> Any:
    head, *rest = path
    return dataclasses.replace(settings, **{head: _replaced(getattr(settings, head), rest, value) if rest else value})


register_search_method("greedy", "lmgym.search.search:greedy_search")
register_search_method("maj", "lmgym.search.search:majority_search", budget="n")
register_search_method("weighted_maj", "lmgym.search.search:weighted_majority_search", needs_scorer=True,
                       budget="n")
register_search_method("best_of_n", "lmgym.search.search:best_of_n_search", needs_scorer=True, budget="n",
                       label=lambda s: f"best_of_{s.n}")
register_search_method("beam", "lmgym.search.beam_search:beam_search", needs_scorer=True, budget="beam_width",
                       label=lambda s: f"beam_{s.beam_width}x{s.beam_expand}",
                       shape=lambda s: f"beam_{s.beam_width}x{s.beam_expand}")
register_search_method("mcts", "lmgym.search.search:mcts_search", needs_scorer=True, budget="mcts.simulations",
                       label=lambda s: f"mcts_{s.mcts.simulations}")
