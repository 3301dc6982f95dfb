"""Training data beyond env episodes: SFT examples, preference pairs (DPO), reflection pairs for the
actor and critic roles, tool-use transcripts of RAG-HotpotQA episodes (SFT warm starts), and step-level
data for process reward models (`lmgym.traindata.step_data`).

Not named `datasets`: that would shadow Hugging Face's library."""
from lmgym.traindata.oracle_feedback import Feedback, GoldSolution, gold_solution, oracle_feedback
from lmgym.traindata.preference_data import PreferencePair, load_preference_pairs, save_preference_pairs
from lmgym.traindata.reflection_branching import branched_reflection_episodes
from lmgym.traindata.reflection_context_pairs import ContextPairs, context_pairs
from lmgym.traindata.reflection_pairs import ReflectionTriple, load_triples, pairs_from_episodes, pairs_from_triples
from lmgym.traindata.reflection_sft import (
    AnswerRow,
    ReflectionTurnExample,
    actor_refinement_sft_examples,
    answer_rows,
    critic_sft_examples,
)
from lmgym.traindata.sft_data import (
    ChatExample,
    SFTExample,
    arithmetic_sft_examples,
    gsm8k_sft_examples,
    load_sft_examples,
    math_sft_examples,
)
from lmgym.traindata.tool_transcripts import ToolTranscript, hop2_queries, tool_transcript, tool_transcripts

__all__ = [
    "Feedback", "GoldSolution", "gold_solution", "oracle_feedback", "AnswerRow", "ReflectionTurnExample",
    "actor_refinement_sft_examples", "answer_rows", "critic_sft_examples",
    "PreferencePair", "load_preference_pairs", "save_preference_pairs",
    "ReflectionTriple", "load_triples", "pairs_from_episodes", "pairs_from_triples",
    "ContextPairs", "context_pairs", "branched_reflection_episodes",
    "SFTExample", "ChatExample", "load_sft_examples", "gsm8k_sft_examples", "arithmetic_sft_examples",
    "math_sft_examples", "ToolTranscript", "hop2_queries", "tool_transcript", "tool_transcripts",
]
