"""Search at inference: at equal token budgets maj@n, weighted majority and best-of-n with a verifier, beam search
and MCTS over reasoning steps (`run_search`), and the votes they choose an answer by. Measuring them (accuracy,
pass@k, equal-budget tables and curves, RAG metrics) is `lmgym.evaluation`'s job."""
import importlib

from lmgym.search.beam_search import beam_search
from lmgym.search.mcts import MCTS, MCTSConfig
from lmgym.search.methods import SearchMethod, register_search_method, search_methods, unregister_search_method
from lmgym.search.search import SearchSettings, run_search
from lmgym.search.search_types import SearchResult, StepScorer
from lmgym.search.votes import majority_answer, weighted_majority

# exported here until 0.3.0, now lmgym.evaluation's (a layer above search): loaded from there on first use, for
# one release
_MOVED_NAMES = ("evaluate", "pass_at_k", "evaluate_rag", "evaluate_search", "evaluate_curves", "plot_curves",
               "save_curves")

__all__ = [
    "MCTS", "MCTSConfig", "SearchSettings", "run_search", "beam_search", "SearchResult", "StepScorer",
    "majority_answer", "weighted_majority",
    "SearchMethod", "register_search_method", "search_methods", "unregister_search_method",
]


def __getattr__(name: str):
    """A name that moved to `lmgym.evaluation`, loaded from there (the layer order forbids importing it above)."""
    if name in _MOVED_NAMES:
        return getattr(importlib.import_module("lmgym.evaluation"), name)
    raise AttributeError(f"module 'lmgym.search' has no attribute {name!r}")
