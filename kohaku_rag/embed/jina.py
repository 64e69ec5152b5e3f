"""Jina AI embeddings: jina-embeddings-v3 (text) and jina-embeddings-v4 (text and images).

Both embed a passage and a query through different task adapters ("retrieval.passage" /
"retrieval.query"), so the role picks the `task` of each request, and both truncate their
Matryoshka vector server-side to `dimensions` (v3: 32..1024, v4: 128..2048). The wire format
is Jina's /v1/embeddings, a superset of OpenAI's, so the HTTP, batching, retry and
credential code is shared with the OpenAI backend (embed/http.py).

v4 puts images in the same vector space as text: an input item is `{"text": ...}` or
`{"image": <URL or base64>}`; images are sent as `data:image/png;base64,...` URLs, embedded
with the passage task (a figure is a document being searched, the question the query), in
batches of `image_batch_size` (an image is ~100x the bytes of a sentence).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import numpy as np

from kohaku_rag.embed.base import Role, check_images, check_texts
from kohaku_rag.embed.http import HostedEmbedder
from kohaku_rag.http_retry import redact_url

JINA_BASE_URL = "https://api.jina.ai"
V4_PREFIX = "jina-embeddings-v4"
# The Matryoshka widths v4 may be truncated to (Jina's documentation: 128 to 2048); other
# models are sent whatever `dimensions` says (the tests' fake server takes any width).
WIDTHS = {V4_PREFIX: (128, 2048)}
# Magic numbers of the encodings a figure may be stored in, for the data URL's media type.
_IMAGE_TYPES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def is_multimodal(model: str) -> bool:
    """Whether `model` embeds images through /v1/embeddings (jina-embeddings-v4 and its variants)."""
    return model.startswith(V4_PREFIX)


def check_width(model: str, dimensions: int | None) -> None:
    """A clear error for a width the model cannot be truncated to, before any request."""
    for prefix, (low, high) in WIDTHS.items():
        if model.startswith(prefix) and dimensions is not None and not low <= dimensions <= high:
            raise ValueError(f"{model} takes dimensions from {low} to {high} (Matryoshka), got {dimensions}")


def image_data_url(image: bytes) -> str:
    """`data:<type>;base64,<bytes>`; the type from the file's magic number (WebP too)."""
    media = next((m for magic, m in _IMAGE_TYPES if image.startswith(magic)), None)
    if media is None and image[:4] == b"RIFF" and image[8:12] == b"WEBP":
        media = "image/webp"
    if media is None:
        raise ValueError(f"not a PNG, JPEG, GIF or WebP file (starts with {image[:8]!r})")
    return f"data:{media};base64,{base64.b64encode(image).decode('ascii')}"


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
        image_batch_size: int = 4,
        timeout: float = 60.0,
        max_retries: int = 5,
        concurrency: int = 4,
        backoff_base: float = 0.5,
    ) -> None:
        check_width(model, dimensions)
        if image_batch_size < 1:
            raise ValueError(f"image_batch_size must be at least 1, got {image_batch_size}")
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
        self.image_batch_size = image_batch_size

    @property
    def model_id(self) -> str:
        tasks = f"{self.tasks['passage']}/{self.tasks['query']}"
        # Recorded in the index: the endpoint without its credentials.
        return f"jina:{self.model}:tasks={tasks}:dim={self.dimensions or 'native'}@{redact_url(self._client.url)}"

    @property
    def embeds_images(self) -> bool:
        return is_multimodal(self.model)

    def embed(self, texts: Sequence[str], *, role: Role = "passage") -> np.ndarray:
        texts = check_texts(texts, role)
        task = self.tasks[role]
        # v4 takes typed items, so a text can never be mistaken for an image URL.
        wrap = is_multimodal(self.model)
        return self._client.embed(
            texts, self.batch_size, lambda batch: self._body([{"text": t} for t in batch] if wrap else batch, task)
        )

    def embed_images(self, images: Sequence[bytes]) -> np.ndarray:
        """One vector per image, with the passage task; images go as base64 data URLs."""
        if not self.embeds_images:
            raise ValueError(f"{self.model} embeds text only; images need {V4_PREFIX}")
        urls = [image_data_url(image) for image in check_images(images)]
        task = self.tasks["passage"]
        return self._client.embed(
            urls, self.image_batch_size, lambda batch: self._body([{"image": url} for url in batch], task)
        )

    def _body(self, items: Sequence[str | dict[str, str]], task: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "input": list(items),
            "normalized": True,
            "embedding_type": "float",
        }
        if task is not None:
            body["task"] = task
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        return body
