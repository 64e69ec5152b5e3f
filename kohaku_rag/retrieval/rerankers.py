"""Cross-encoder style rerankers: score (query, passage) pairs, higher is more relevant.

One protocol for every backend (a hosted `/rerank` endpoint, the bundled LLM's token
probabilities, an embedding similarity), so HERO's fused-top-N rerank and Marikarp's
knowledge-aware diverse rerank can use any of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kohaku_rag.embed.base import Embedder

__all__ = ["EmbeddingReranker", "Reranker"]


class Reranker(Protocol):
    """Scores passages against one query; the list is aligned with `passages`."""

    def scores(self, query: str, passages: Sequence[str]) -> list[float]: ...


class EmbeddingReranker:
    """The offline baseline: cosine similarity of the query and passage embeddings (the
    index's own embedder, so no other model is loaded)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        q = self.embedder.embed([query], role="query")[0]
        p = self.embedder.embed(list(passages), role="passage")
        return [float(x) for x in p @ q]
