"""Search and evaluation at inference: greedy accuracy, pass@k and maj@k (`evaluate`), and at equal token
budgets maj@n, weighted majority and best-of-n with a verifier, beam search and MCTS over reasoning steps (`run_search`,
`evaluate_search`), accuracy-vs-tokens curves under hard token caps (`evaluate_curves`); HotpotQA episodes'
retrieval and answers (`evaluate_rag`)."""
from lmgym.search.beam_search import beam_search
from lmgym.search.evaluate import evaluate, majority_answer, pass_at_k
from lmgym.search.mcts import MCTS, MCTSConfig
from lmgym.search.rag_evaluate import evaluate_rag
from lmgym.search.search import SearchSettings, run_search
from lmgym.search.search_eval import evaluate_search
from lmgym.search.curves import evaluate_curves, plot_curves, save_curves
from lmgym.search.weighted_vote import weighted_majority
from lmgym.search.search_types import SearchResult, StepScorer

__all__ = [
    "evaluate", "pass_at_k", "majority_answer", "MCTS", "MCTSConfig", "SearchSettings", "run_search",
    "beam_search", "evaluate_search", "SearchResult", "StepScorer", "evaluate_rag", "evaluate_curves",
    "plot_curves", "save_curves", "weighted_majority",
]
