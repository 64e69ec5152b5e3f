"""Jina AI embeddings (jina-embeddings-v3): task LoRA adapters per role, Matryoshka widths.

v3 embeds a passage and a query through different adapters ("retrieval.passage" /
"retrieval.query"), so the role picks the `task` of each request. `dimensions` truncates
the Matryoshka vector server-side (32..1024). The wire format is Jina's /v1/embeddings,
a superset of OpenAI's, so the HTTP and retry code is shared with the OpenAI backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kohaku_rag.embed.base import Role, check_texts
from kohaku_rag.embed.http import HostedEmbedder
from kohaku_rag.http_retry import redact_url

JINA_BASE_URL = "https://api.jina.ai"


class JinaEmbedder(HostedEmbedder):
    provider = "Jina"

    def __init__(
        self,
        model: str = "jina-embeddings-v3",
        *,
        passage_task: str | None = "retrieval.passage",
        query_task: str | None = "retrieval.query",
        dimensions: int | None = None,
        base_url: str = JINA_BASE_URL,
        api_key_env: str | None = "JINA_API_KEY",
        batch_size: int = 64,
        timeout: float = 60.0,
        max_retries: int = 5,
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
        # None leaves `task` out of the request, for Jina models without adapters (v2).
        self.tasks: dict[Role, str | None] = {"passage": passage_task, "query": query_task}

    @property
    def model_id(self) -> str:
        tasks = f"{self.tasks['passage']}/{self.tasks['query']}"
        # Recorded in the index: the endpoint without its credentials.
        return f"jina:{self.model}:tasks={tasks}:dim={self.dimensions or 'native'}@{redact_url(self._client.url)}"

    def embed(self, texts: Sequence[str], *, role: Role = "passage") -> np.ndarray:
        texts = check_texts(texts, role)
        task = self.tasks[role]
        return self._client.embed(texts, self.batch_size, lambda batch: self._body(batch, task))

    def _body(self, batch: list[str], task: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "input": batch,
            "normalized": True,
            "embedding_type": "float",
        }
        if task is not None:
            body["task"] = task
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        return body
