"""What every question searches with: the lake's `Retriever`, or one wrapped by Marikarp's
diverse rerank when the config turns it on, serialized when several question threads share
it (the vector store connection and the embedder are shared; their LLM calls overlap)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

from kohaku_rag.answering.diverse_rerank import DiverseSearcher, reranker_for
from kohaku_rag.answering.qa_config import RetrievalPart
from kohaku_rag.llm import ChatModel
from kohaku_rag.retrieval.context import ContextItem
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig
from kohaku_rag.retrieval.retriever import Retriever

__all__ = ["Searcher", "Serialized", "answering_searcher"]


class Searcher(Protocol):
    """What the answering pipeline searches with: a `Retriever`, or one wrapped by a rerank."""

    def search(self, queries: Sequence[str], cfg: RetrievalConfig) -> list[ContextItem]: ...


def answering_searcher(
    retriever: Searcher, part: RetrievalPart, chat: ChatModel | None, shared: bool = False
) -> Searcher:
    """The searcher a config retrieves with: the retriever, diversely reranked when
    `diverse_rerank` is on (which needs the lake's `Retriever` and a chat model). `shared`:
    several question threads search with it, one at a time through the index, while their
    LLM calls overlap."""
    lock = threading.Lock() if shared else None
    if not part.diverse_rerank:
        return Serialized(retriever, lock) if lock else retriever
    if chat is None:
        raise ValueError("diverse_rerank is on but no chat model was given")
    if not isinstance(retriever, Retriever):
        raise TypeError(f"diverse_rerank needs the lake's Retriever, got {type(retriever).__name__}")
    return DiverseSearcher(retriever, reranker_for(part, retriever), chat, part, lock)


class Serialized:
    """A searcher used from several question threads: one search at a time."""

    def __init__(self, inner: Searcher, lock: threading.Lock) -> None:
        self.inner = inner
        self._lock = lock

    def search(self, queries: Sequence[str], cfg: RetrievalConfig) -> list[ContextItem]:
        with self._lock:
            return self.inner.search(queries, cfg)
