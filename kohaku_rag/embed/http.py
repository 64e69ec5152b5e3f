"""The HTTP half of the remote embedding backends (OpenAI-compatible and Jina).

Both speak the same `/v1/embeddings` dialect: POST a JSON body holding `input`, get back
`data: [{index, embedding}]`. This module owns what they share: the API key from the
environment, batching over a bounded thread pool, retries with exponential back-off and
jitter (honouring Retry-After) on 429/5xx/timeouts/dropped connections, re-ordering by
`index`, and L2 normalisation. A backend only says what body to send for a batch.
"""

from __future__ import annotations

import email.utils
import logging
import math
import os
import random
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np

from kohaku_rag.embed.base import l2_normalise
from kohaku_rag.errors import BackendError

log = logging.getLogger(__name__)

# 408/409/425 are "try again" answers some gateways give; 429 is the rate limit.
RETRY_STATUSES = frozenset({408, 409, 425, 429})
MAX_RETRY_AFTER = 300.0  # never sleep longer than this on a server's say-so
BODY_SNIPPET = 300  # characters of an error body kept in a BackendError

BodyFor = Callable[[list[str]], dict[str, Any]]


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 5
    backoff_base: float = 0.5  # first back-off in seconds; doubles per attempt
    backoff_max: float = 30.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Equal jitter: half the exponential step fixed, half random, so clients spread out."""
        step = min(self.backoff_max, self.backoff_base * 2**attempt)
        backoff = step / 2 + random.uniform(0, step / 2)
        if retry_after is None:
            return backoff
        return max(backoff, min(retry_after, MAX_RETRY_AFTER))


def read_api_key(api_key_env: str | None, backend: str) -> str | None:
    """The key from the environment; None when the backend needs none (api_key_env=None)."""
    if api_key_env is None:
        return None
    key = os.environ.get(api_key_env, "").strip()
    if not key:
        raise BackendError(
            f"{backend} embeddings need an API key: set the environment variable {api_key_env} "
            "(or point api_key_env at the variable that holds it)"
        )
    return key


def embeddings_url(base_url: str) -> str:
    """`http://host:8000`, `.../v1` and `.../v1/` all mean `.../v1/embeddings`."""
    url = base_url.strip().rstrip("/")
    if not re.match(r"^https?://[^/]", url):
        raise ValueError(f"base_url {base_url!r} must start with http:// or https://")
    root = url if url.endswith("/v1") else f"{url}/v1"
    return f"{root}/embeddings"


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header, given as delay-seconds or as an HTTP date."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds) if math.isfinite(seconds) else None


class _Retryable(Exception):
    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


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
        return f"EmbeddingsClient(url={self.url!r})"

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
            raise BackendError(
                f"{self.url}: returned {'- and '.join(map(str, widths))}-d vectors{expected}"
            )
        self.dim = widths[0]
        return l2_normalise(np.vstack(parts))

    def _post_batch(self, texts: list[str], body: dict[str, Any]) -> np.ndarray:
        last = "no attempt made"
        for attempt in range(self.retry.max_retries + 1):
            try:
                return self._parse(self._post_once(body), len(texts))
            except _Retryable as exc:
                last = exc.reason
                if attempt == self.retry.max_retries:
                    break
                wait = self.retry.delay(attempt, exc.retry_after)
                log.warning("%s: %s; retry %d/%d in %.1fs", self.url, last, attempt + 1,
                            self.retry.max_retries, wait)
                time.sleep(wait)
        raise BackendError(
            f"{self.url}: embedding request failed after {self.retry.max_retries + 1} attempts; "
            f"last error: {last}"
        )

    def _post_once(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self._http.post(self.url, json=body)
        except httpx.TimeoutException as exc:
            raise _Retryable(f"timed out ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise _Retryable(f"connection error ({type(exc).__name__}: {exc})") from exc
        status = response.status_code
        if status in RETRY_STATUSES or status >= 500:
            raise _Retryable(
                f"HTTP {status}: {self._snippet(response)}",
                parse_retry_after(response.headers.get("Retry-After")),
            )
        if status >= 400:
            hint = " (check the API key variable)" if status in (401, 403) else ""
            raise BackendError(f"{self.url}: HTTP {status}{hint}: {self._snippet(response)}")
        try:
            payload = response.json()
        except ValueError as exc:
            raise BackendError(f"{self.url}: HTTP {status} with a body that is not JSON: "
                               f"{self._snippet(response)}") from exc
        if not isinstance(payload, dict):
            raise BackendError(f"{self.url}: expected a JSON object, got {type(payload).__name__}")
        return payload

    def _parse(self, payload: dict[str, Any], expected: int) -> np.ndarray:
        """Rows ordered by each item's `index`, which servers need not return in order."""
        data = payload.get("data")
        if not isinstance(data, list) or len(data) != expected:
            got = len(data) if isinstance(data, list) else type(data).__name__
            raise BackendError(f"{self.url}: expected 'data' with {expected} embeddings, got {got}")
        try:
            ordered = sorted(data, key=lambda item: int(item["index"]))
            indices = [int(item["index"]) for item in ordered]
            rows = np.asarray([item["embedding"] for item in ordered], dtype=np.float32)
        except (KeyError, TypeError, ValueError) as exc:
            raise BackendError(
                f"{self.url}: malformed 'data' item ({exc}); expected {{index, embedding: [float]}}"
            ) from exc
        if indices != list(range(expected)):
            raise BackendError(f"{self.url}: response indices {indices[:10]}... are not 0..{expected - 1}")
        if rows.ndim != 2 or rows.shape[1] == 0 or not np.isfinite(rows).all():
            raise BackendError(f"{self.url}: embeddings are not equal-length lists of finite floats")
        return rows

    def _snippet(self, response: httpx.Response) -> str:
        text = response.text[:BODY_SNIPPET].replace("\n", " ")
        if self._secret:
            text = text.replace(self._secret, "***")
        return text or "(empty body)"
