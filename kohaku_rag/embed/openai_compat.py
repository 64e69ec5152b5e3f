"""Embeddings from any OpenAI-compatible `/v1/embeddings` server (OpenAI, vLLM, llama.cpp, ...)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kohaku_rag.embed.base import Role, check_texts
from kohaku_rag.embed.http import HostedEmbedder
from kohaku_rag.http_retry import redact_url

OPENAI_BASE_URL = "https://api.openai.com"


class OpenAIEmbedder(HostedEmbedder):
    """Symmetric remote embeddings; `role` does not change the request.

    `api_key_env=None` sends no Authorization header (local servers). `dimensions` asks
    the server to shorten vectors (text-embedding-3-*); without it the width is learned
    from the first response.
    """

    provider = "OpenAI-compatible"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        dimensions: int | None = None,
        batch_size: int = 64,
        timeout: float = 60.0,
        max_retries: int = 5,
        *,
        concurrency: int = 4,
        backoff_base: float = 0.5,
    ) -> None:
        super().__init__(
            model,
            base_url,
            api_key_env=api_key_env,
            dimensions=dimensions,
            batch_size=batch_size,
            timeout=timeout,
            max_retries=max_retries,
            concurrency=concurrency,
            backoff_base=backoff_base,
        )

    @property
    def model_id(self) -> str:
        # The endpoint is part of it: two servers may serve one model name at different
        # quantisations, and their vectors must not share cache entries.
        width = self.dimensions or "native"
        return f"openai:{self.model}:dim={width}@{redact_url(self._client.url)}"  # recorded in the index

    def embed(self, texts: Sequence[str], *, role: Role = "passage") -> np.ndarray:
        texts = check_texts(texts, role)
        return self._client.embed(texts, self.batch_size, self._body)

    def _body(self, batch: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        return body
