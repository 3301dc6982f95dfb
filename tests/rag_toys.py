"""Small in-code stand-ins for the HotpotQA env tests: records, a document store and an embedder.

`ToyStore` has the search signature of `lmgym.retrieval.DocumentStore` (`search(query, k, **kwargs) -> list of
hits with doc_id, title, text, score`): a passage scores the number of distinct lower-case words it shares
with the query (ties: corpus order), so rankings can be worked out by hand. `LetterEmbedder` embeds a
text as its counts of the letters a-z, so cosines can be too ("dijon" . "paris" = 1 / (sqrt 5 sqrt 5)).
"""

from __future__ import annotations

import re

import numpy as np

from lmgym.envs.hotpotqa.data import HotpotQARecord
from lmgym.retrieval import Hit

CORPUS = {
    "Eiffel Tower": "The Eiffel Tower is a lattice tower in Paris, designed by the company of Gustave Eiffel.",
    "Gustave Eiffel": "Gustave Eiffel was a French civil engineer, born in Dijon.",
    "Dijon": "Dijon is a city in eastern France.",
    "Big Ben": "Big Ben is the great bell of the clock in London.",
    "Tower Bridge": "Tower Bridge is a bridge in London.",
    "Statue of Liberty": "The Statue of Liberty has an iron frame built by the company of Gustave Eiffel.",
}


def record(record_id: str, question: str, answer: str, supporting: tuple[str, ...]) -> HotpotQARecord:
    """A record whose context is every corpus paragraph (one sentence each) and whose supporting facts are
    sentence 0 of each title in `supporting`."""
    return HotpotQARecord(record_id, question, answer, "bridge", "hard", tuple((title, 0) for title in supporting),
                          tuple((title, (text,)) for title, text in CORPUS.items()))


RECORDS = [
    record("dijon", "Where was the engineer whose company designed the Eiffel Tower born?", "Dijon",
           ("Eiffel Tower", "Gustave Eiffel")),
    record("london", "Which city has both Big Ben and Tower Bridge?", "London", ("Big Ben", "Tower Bridge")),
    record("same-city", "Are Big Ben and the Eiffel Tower in the same city?", "no", ("Big Ben", "Eiffel Tower")),
]




def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


class ToyStore:
    """Word-overlap search over CORPUS; counts its searches (`calls`) and can be told to fail."""

    def __init__(self, embedder=None, fail: bool = False):
        self.embedder, self.fail, self.calls = embedder, fail, []

    def search(self, query: str, k: int, **kwargs) -> list[Hit]:
        self.calls.append((query, k, kwargs))
        if self.fail:
            raise ConnectionError("index is gone")
        hits = [Hit(f"doc{i}", title, text, float(len(words(query) & words(title + " " + text))))
                for i, (title, text) in enumerate(CORPUS.items())]
        return sorted(hits, key=lambda hit: -hit.score)[:k]  # stable: ties keep corpus order


class LetterEmbedder:
    """Counts of a-z per text: deterministic, instant, cosines by hand."""

    def embed(self, texts) -> np.ndarray:
        rows = np.zeros((len(texts), 26))
        for row, text in enumerate(texts):
            for char in text.lower():
                if "a" <= char <= "z":
                    rows[row, ord(char) - ord("a")] += 1
        return rows
