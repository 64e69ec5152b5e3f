"""Loaded models shared by every run of one process.

Loading the embedded LLM or the OCR engine takes seconds, so a process (the CLI running
many partitions in-process, a notebook, the Dagster code server) keeps one of each per
spec. The pool is an object, not a module-level cache: the Dagster layer hands one pool to
its runs as a resource, and the Python API holds its own.
"""

from __future__ import annotations

from kohaku_rag.indexing.index_config import IndexConfig
from kohaku_rag.indexing.index_models import IndexModels
from kohaku_rag.lake.layout import Lake
from kohaku_rag.llm import ChatModel, LLMSpec, make_chat_model
from kohaku_rag.retrieval.retriever import Retriever, open_retriever


class ModelPool(IndexModels):
    """One loaded model per (kind, spec, lake), built on first use; thread-safe. Indexing's
    models (embedder, captioner) are `IndexModels`, which indexing uses without this module;
    the pool adds the LLM and the retriever, which sit above indexing."""

    def chat(self, spec: LLMSpec, lake: Lake) -> ChatModel:
        return self._get(("chat", spec, str(lake.root)), lambda: make_chat_model(spec, lake.root))

    def retriever(self, lake: Lake, cfg: IndexConfig) -> Retriever:
        """The lake's retriever. Reopened when a new index generation is published (a
        re-index in this process or another), so a long-lived pool never serves a stale index."""
        stamp = lake.index_stamp()
        with self._lock:  # forget the retrievers of older index files of this lake
            for key in [k for k in self._items if k[:3] == ("retriever", str(lake.root), cfg) and k[3] != stamp]:
                del self._items[key]
        return self._get(
            ("retriever", str(lake.root), cfg, stamp),
            lambda: open_retriever(lake, cfg, chat_for=lambda spec: self.chat(spec, lake)),
        )
