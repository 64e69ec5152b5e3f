"""The HTTP half of the remote embedding backends (OpenAI-compatible and Jina).

Both speak the same `/v1/embeddings` dialect: POST a JSON body holding `input`, get back
`data: [{index, embedding}]`. This module owns what they share: the API key from the
environment, batching over a bounded thread pool, retries with exponential back-off and
jitter (honouring Retry-After) on 429/5xx/timeouts/dropped connections, re-ordering by
`index`, and L2 normalisation. A backend only says what body to send for a batch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np

from kohaku_rag.embed.base import Role, l2_normalise
from kohaku_rag.errors import BackendError
from kohaku_rag.http_retry import (
    BODY_SNIPPET,
    MAX_RETRY_AFTER,
    RetryPolicy,
    api_url,
    call_with_retries,
    check_one_credential,
    http_error,
    normalise_base_url,
    parse_retry_after,
    post_json,
    safe_url,
    snippet,
    url_secrets,
)
from kohaku_rag.http_retry import RETRYABLE_STATUS as RETRY_STATUSES
from kohaku_rag.http_retry import read_api_key as _read_key

# Re-exported: the backends (jina, openai_compat) import the retry pieces from here.
__all__ = [
    "BODY_SNIPPET",
    "MAX_RETRY_AFTER",
    "RETRY_STATUSES",
    "BodyFor",
    "EmbeddingsClient",
    "RetryPolicy",
    "embeddings_url",
    "HostedEmbedder",
    "hosted_client",
    "parse_retry_after",
    "read_api_key",
]

BodyFor = Callable[[list[str]], dict[str, Any]]


def read_api_key(api_key_env: str | None, backend: str) -> str | None:
    """The key from the environment; None when the backend needs none (api_key_env=None)."""
    return _read_key(api_key_env, f"{backend} embeddings")


def embeddings_url(base_url: str) -> str:
    """`http://host:8000`, `.../v1` and `.../v1/` all mean `.../v1/embeddings`."""
    return api_url(normalise_base_url(base_url), "embeddings")


class EmbeddingsClient:
    """POSTs batches of texts to one embeddings endpoint; one httpx client, thread-safe."""

    def __init__(
        self,
        url: str,
        api_key: str | None,
        *,
        timeout: float,
        retry: RetryPolicy,
        concurrency: int = 4,
        dim: int | None = None,
    ) -> None:
        if timeout <= 0 or concurrency < 1 or retry.max_retries < 0:
            raise ValueError("timeout must be > 0, concurrency >= 1 and max_retries >= 0")
        self.url = url
        # Credentials written into the URL (user:key@, ?api-key=) never reach a message.
        self._where = safe_url(url)
        self._secrets = url_secrets(url)
        self.retry = retry
        self.concurrency = concurrency
        # The vector width: given, or pinned by the first response; a change later is an error.
        self.dim = dim
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key is not None:
            headers["Authorization"] = f"Bearer {api_key}"
        # Kept only to scrub it from error text a server might echo back.
        self._secret = api_key
        self._http = httpx.Client(headers=headers, timeout=timeout)

    def __repr__(self) -> str:
        return f"EmbeddingsClient(url={self._where!r})"

    def close(self) -> None:
        self._http.close()

    def embed(self, texts: Sequence[str], batch_size: int, body_for: BodyFor) -> np.ndarray:
        """L2-normalised rows for `texts`, in order; batches run `concurrency` at a time."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        batches = [list(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
        if not batches:
            return np.empty((0, self.dim or 0), dtype=np.float32)
        if len(batches) == 1 or self.concurrency == 1:
            parts = [self._post_batch(b, body_for(b)) for b in batches]
        else:
            with ThreadPoolExecutor(max_workers=min(self.concurrency, len(batches))) as pool:
                parts = list(pool.map(lambda b: self._post_batch(b, body_for(b)), batches))
        widths = sorted({p.shape[1] for p in parts})
        if len(widths) != 1 or (self.dim is not None and widths[0] != self.dim):
            expected = f", expected {self.dim}" if self.dim is not None else ""
            raise BackendError(f"{self._where}: returned {'- and '.join(map(str, widths))}-d vectors{expected}")
        self.dim = widths[0]
        return l2_normalise(np.vstack(parts))

    def _post_batch(self, texts: list[str], body: dict[str, Any]) -> np.ndarray:
        return call_with_retries(
            lambda: self._parse(self._post_once(body), len(texts)),
            self.retry,
            where=self._where,
            failed=f"{self._where}: embedding request failed",
        )

    def _post_once(self, body: dict[str, Any]) -> dict[str, Any]:
        response = post_json(self._http, self.url, body, self._secret, *self._secrets)
        status = response.status_code
        if status >= 400:
            raise BackendError(f"{self._where}: {http_error(response, self._secret, *self._secrets)}")
        try:
            payload = response.json()
        except ValueError as exc:
            raise BackendError(
                f"{self._where}: HTTP {status} with a body that is not JSON: "
                f"{snippet(response, self._secret, *self._secrets)}"
            ) from exc
        if not isinstance(payload, dict):
            raise BackendError(f"{self._where}: expected a JSON object, got {type(payload).__name__}")
        return payload

    def _parse(self, payload: dict[str, Any], expected: int) -> np.ndarray:
        """Rows ordered by each item's `index`, which servers need not return in order."""
        data = payload.get("data")
        if not isinstance(data, list) or len(data) != expected:
            got = len(data) if isinstance(data, list) else type(data).__name__
            raise BackendError(f"{self._where}: expected 'data' with {expected} embeddings, got {got}")
        try:
            ordered = sorted(data, key=lambda item: int(item["index"]))
            indices = [int(item["index"]) for item in ordered]
            rows = np.asarray([item["embedding"] for item in ordered], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise BackendError(
                f"{self._where}: malformed 'data' item ({exc}); expected {{index, embedding: [float]}}"
            ) from exc
        if indices != list(range(expected)):
            raise BackendError(f"{self._where}: response indices {indices[:10]}... are not 0..{expected - 1}")
        if rows.ndim != 2 or rows.shape[1] == 0 or not np.isfinite(rows).all():
            raise BackendError(f"{self._where}: embeddings are not equal-length lists of finite floats")
        return rows


def hosted_client(
    base_url: str,
    provider: str,
    *,
    api_key_env: str | None,
    dimensions: int | None,
    batch_size: int,
    timeout: float,
    max_retries: int,
    backoff_base: float,
    concurrency: int,
) -> EmbeddingsClient:
    """The client of a hosted embedder, its settings checked (both hosted backends share it)."""
    if dimensions is not None and dimensions < 1:
        raise ValueError(f"dimensions must be positive, got {dimensions}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    api_key = read_api_key(api_key_env, provider)
    check_one_credential(base_url, api_key, api_key_env)
    return EmbeddingsClient(
        embeddings_url(base_url),
        api_key,
        timeout=timeout,
        retry=RetryPolicy(max_retries=max_retries, backoff_base=backoff_base),
        concurrency=concurrency,
        dim=dimensions,
    )


class HostedEmbedder(ABC):
    """What the hosted embedders share: the model name, the requested width, the batch
    size and the HTTP client; the width is learned from the first response when not given.
    Each backend writes its own request body in `embed`."""

    provider = "hosted"

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key_env: str | None,
        dimensions: int | None,
        batch_size: int,
        timeout: float,
        max_retries: int,
        concurrency: int,
        backoff_base: float,
    ) -> None:
        if not model:
            raise ValueError(f"{type(self).__name__} needs a model name")
        self.model = model
        self.dimensions = dimensions
        self.batch_size = batch_size
        self._client = hosted_client(
            base_url,
            self.provider,
            api_key_env=api_key_env,
            dimensions=dimensions,
            batch_size=batch_size,
            timeout=timeout,
            max_retries=max_retries,
            backoff_base=backoff_base,
            concurrency=concurrency,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(url={safe_url(self._client.url)!r}, model={self.model!r})"

    @abstractmethod
    def embed(self, texts: Sequence[str], *, role: Role = "passage") -> np.ndarray:
        """One L2-normalised vector per text (the Embedder protocol)."""

    @property
    def dim(self) -> int:
        if self._client.dim is None:
            self.embed(["dimension probe"])  # the width is only known once a server answers
        assert self._client.dim is not None
        return self._client.dim
