"""Loaded models shared by every run of one process.

Loading the embedded LLM or the OCR engine takes seconds, so a process (the CLI running
many partitions in-process, a notebook, the Dagster code server) keeps one of each per
spec. The pool is an object, not a module-level cache: the Dagster layer hands one pool to
its runs as a resource, and the Python API holds its own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from kohaku_rag.embed import EmbedderSpec, make_embedder
from kohaku_rag.embed.base import Embedder
from kohaku_rag.indexing.captions import CAPTION_PROMPT, Captioner, OcrCaptioner, VisionLLMCaptioner
from kohaku_rag.indexing.index_config import IndexConfig
from kohaku_rag.lake import Lake
from kohaku_rag.llm import ChatModel, LLMSpec, make_chat_model
from kohaku_rag.retrieval.retriever import Retriever, open_retriever

T = TypeVar("T")


class ModelPool:
    """One loaded model per (kind, spec, lake), built on first use; thread-safe."""

    def __init__(self) -> None:
        self._items: dict[tuple[Hashable, ...], Any] = {}
        self._lock = threading.Lock()

    def _get(self, key: tuple[Hashable, ...], build: Callable[[], T]) -> T:
        with self._lock:
            if key not in self._items:
                self._items[key] = build()
            return self._items[key]

    def embedder(self, spec: EmbedderSpec, lake: Lake) -> Embedder:
        cache = lake.cache_dir / "embeddings"
        return self._get(("embedder", spec, str(cache)), lambda: make_embedder(spec, cache))

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

    def captioner(self, cfg: IndexConfig) -> Captioner | None:
        """The index config's figure captioner. The OCR engine is shared; a vision captioner
        holds an HTTP client, so each caller gets its own and closes it."""
        if cfg.captioner == "none":
            return None
        if cfg.captioner == "ocr":
            return self._get(("ocr",), OcrCaptioner)
        if not (cfg.vision_base_url and cfg.vision_model):
            raise ValueError("captioner = 'vision' needs vision_base_url and vision_model in the index config")
        return VisionLLMCaptioner(
            cfg.vision_base_url,
            cfg.vision_model,
            api_key_env=cfg.vision_api_key_env,
            prompt=cfg.vision_prompt or CAPTION_PROMPT,
            max_concurrent=cfg.vision_max_concurrent,
            timeout=cfg.vision_timeout,
            max_retries=cfg.vision_max_retries,
        )
