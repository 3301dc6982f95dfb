"""HotpotQA question answering: the data, the closed-book and distractor env, retrieval-augmented envs, and
their answer and retrieval rewards.

- `data`: HotpotQA records from a local file or folder, or the Hugging Face hub;
- `env`: `HotpotQAEnv` (``HotpotQA-v0``, single turn: closed book, or with the distractor paragraphs);
- `rag`: `RAGHotpotQAEnv` (``RAG-HotpotQA-v0``: the model searches a document store with `SearchTool`,
  then answers);
- `retrieved`: `QuestionSearchHotpotQAEnv` (the store's top passages for the question, no agent);
- `metrics`: SQuAD's normalisation, exact match and token F1, HotpotQA's F1;
- `rewards`: the envs' reward functions (exact match, F1, retrieval MRR and recall, search costs, format).
"""
from lmgym.envs.hotpotqa.env import (
    ANSWER_INSTRUCTION,
    CONTEXTS,
    QA_REWARD_FNS,
    QA_REWARD_WEIGHTS,
    HotpotQAEnv,
    HotpotQAProblems,
    format_paragraphs,
)
from lmgym.envs.hotpotqa.rag import RAGHotpotQAEnv, SearchTool
from lmgym.envs.hotpotqa.retrieved import QuestionSearchHotpotQAEnv

__all__ = ["HotpotQAEnv", "HotpotQAProblems", "RAGHotpotQAEnv", "SearchTool", "QuestionSearchHotpotQAEnv",
           "ANSWER_INSTRUCTION", "CONTEXTS", "QA_REWARD_FNS", "QA_REWARD_WEIGHTS", "format_paragraphs"]
