"""Cross-encoder style rerankers: score (query, passage) pairs, higher is more relevant.

One protocol for every backend (a hosted `/rerank` endpoint, the bundled LLM's token
probabilities, an embedding similarity), so HERO's fused-top-N rerank and Marikarp's
knowledge-aware diverse rerank can use any of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["Reranker"]


class Reranker(Protocol):
    """Scores passages against one query; the list is aligned with `passages`."""

    def scores(self, query: str, passages: Sequence[str]) -> list[float]: ...
