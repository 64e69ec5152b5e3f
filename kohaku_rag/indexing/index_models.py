"""The models indexing loads (the embedder, the figure captioner), one per spec, shared by
every run of one process; thread-safe.

`models.ModelPool` extends this with the LLM and the retriever (which are above indexing),
so a process keeps one pool for both; indexing takes any `IndexModels`, a pool among them.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from kohaku_rag.embed import EmbedderSpec, make_embedder
from kohaku_rag.embed.base import Embedder
from kohaku_rag.indexing.captions import CAPTION_PROMPT, Captioner, OcrCaptioner, VisionLLMCaptioner
from kohaku_rag.indexing.index_config import IndexConfig
from kohaku_rag.lake.layout import Lake

T = TypeVar("T")


class IndexModels:
    """One loaded embedder or OCR engine per spec, built on first use; thread-safe."""

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
