"""Cross-encoder style rerankers: score (query, passage) pairs, higher is more relevant.

One protocol for every backend (a hosted `/rerank` endpoint, the bundled LLM's token
probabilities, an embedding similarity), so HERO's fused-top-N rerank and Marikarp's
knowledge-aware diverse rerank can use any of them. `RerankerSpec` names one as config
(`[retrieval.reranker]`), `make_reranker` builds it.

Hosted endpoints speak one of two shapes:
  jina / cohere / llamacpp  POST {model, query, documents, top_n} ->
                            {"results": [{"index", "relevance_score"}, ...]}
                            (Jina's /v1/rerank, Cohere's /v2/rerank, llama.cpp server's
                            /v1/rerank, started with --reranking)
  tei                       POST {query, texts, raw_scores} -> [{"index", "score"}, ...]
                            (Hugging Face text-embeddings-inference's /rerank)
with the retries, back-off and concurrency every HTTP backend here shares (`http_retry`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

import httpx

from kohaku_rag.config_files import RETRIES, SECONDS, Range
from kohaku_rag.embed.base import Embedder
from kohaku_rag.errors import BackendError
from kohaku_rag.http_retry import (
    RetryPolicy,
    call_with_retries,
    check_api_key_env,
    check_not_redacted,
    http_error,
    post_json,
    read_api_key,
    safe_url,
    snippet,
    url_secrets,
)
from kohaku_rag.llm import LLMSpec, make_chat_model
from kohaku_rag.llm.base import ChatModel, ChatRequest, ChatResult, Message, one_word_request, word_logodds

__all__ = [
    "EmbeddingReranker",
    "HostedReranker",
    "LLMReranker",
    "Reranker",
    "RerankerSpec",
    "make_reranker",
    "yes_no_logodds",
]

RerankAPI = Literal["jina", "cohere", "tei", "llamacpp"]


class Reranker(Protocol):
    """Scores passages against one query; the list is aligned with `passages`."""

    def scores(self, query: str, passages: Sequence[str]) -> list[float]: ...


@dataclass(frozen=True)
class RerankerSpec:
    """Which reranker scores the fused top-N (a `[retrieval.reranker]` table).

    backend "http": `url` is the endpoint itself (e.g. https://api.jina.ai/v1/rerank,
    http://127.0.0.1:8080/v1/rerank), `api` its request/response shape, `model` the model
    name sent (Jina, Cohere, llama.cpp), `api_key_env` the variable holding the key (None:
    no auth); `batch_size` passages per request, `max_concurrent` requests in flight,
    `timeout` and `max_retries` as for the LLM client (they never change a score).
    backend "llm": the bundled LLM (or `model`, a .gguf under `<lake>/models`) reads
    "question, then passage" and the score is log P(Yes) - log P(No) of its first reply
    token; passages are cut to `max_passage_tokens`, and the question prefix is the same
    for every passage so llama.cpp reuses its KV cache. Replies are cached in the lake.
    backend "embedding": cosine similarity with the index's own embedder (a baseline).
    """

    backend: Literal["http", "llm", "embedding"] = "http"
    url: str | None = None
    api: RerankAPI = "jina"
    model: str = ""
    api_key_env: str | None = None
    batch_size: Annotated[int, Range(1, 4096)] = 32
    max_concurrent: Annotated[int, Range(1, 1024)] = 4
    timeout: Annotated[float, SECONDS] = 60.0
    max_retries: Annotated[int, RETRIES] = 5
    max_passage_tokens: Annotated[int, Range(16, 32_768)] = 256

    def __post_init__(self) -> None:
        if self.api_key_env == "":  # TOML's "no key" (configs dump None as ""), as LLMSpec reads it
            object.__setattr__(self, "api_key_env", None)
        check_api_key_env(self.api_key_env)
        if self.backend == "http" and not (self.url or "").startswith(("http://", "https://")):
            raise ValueError(
                f'reranker backend "http" needs a url starting with http:// or https://, got {safe_url(self.url)!r}'
            )
        if self.batch_size < 1 or self.max_concurrent < 1 or self.max_retries < 0 or self.max_passage_tokens < 16:
            raise ValueError("reranker batch_size, max_concurrent >= 1, max_retries >= 0, max_passage_tokens >= 16")
        if not self.timeout > 0:
            raise ValueError(f"reranker timeout must be > 0 seconds, got {self.timeout}")

    def __repr__(self) -> str:
        shown = f"backend={self.backend!r}, api={self.api!r}, url={safe_url(self.url)!r}, model={self.model!r}"
        return f"RerankerSpec({shown})"


class EmbeddingReranker:
    """The offline baseline: cosine similarity of the query and passage embeddings (the
    index's own embedder, so no other model is loaded)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        q = self.embedder.embed([query], role="query")[0]
        p = self.embedder.embed(list(passages), role="passage")
        return [float(x) for x in p @ q]


# ── a hosted /rerank endpoint ─────────────────────────────────────────────


class HostedReranker:
    """Scores through an HTTP rerank endpoint; batches of `batch_size` passages, up to
    `max_concurrent` at once, each retried on 429/5xx/timeouts/dropped connections."""

    def __init__(self, spec: RerankerSpec) -> None:
        assert spec.url is not None  # checked by RerankerSpec
        check_not_redacted(spec.url)
        self.spec = spec
        self.url = spec.url
        self._where = safe_url(spec.url)
        self._secrets = url_secrets(spec.url)
        self._key = read_api_key(spec.api_key_env, f"{spec.api} rerank")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key is not None:
            headers["Authorization"] = f"Bearer {self._key}"
        self._http = httpx.Client(headers=headers, timeout=spec.timeout)
        self._retry = RetryPolicy(max_retries=spec.max_retries)

    def __repr__(self) -> str:
        return f"HostedReranker(url={self._where!r}, api={self.spec.api!r}, model={self.spec.model!r})"

    def close(self) -> None:
        self._http.close()

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        size = self.spec.batch_size
        batches = [list(passages[i : i + size]) for i in range(0, len(passages), size)]
        if not batches:
            return []
        if len(batches) == 1 or self.spec.max_concurrent == 1:
            parts = [self._batch(query, b) for b in batches]
        else:
            with ThreadPoolExecutor(max_workers=min(self.spec.max_concurrent, len(batches))) as pool:
                parts = list(pool.map(lambda b: self._batch(query, b), batches))
        return [s for part in parts for s in part]

    def body(self, query: str, passages: list[str]) -> dict[str, Any]:
        if self.spec.api == "tei":
            return {"query": query, "texts": passages, "raw_scores": False}
        body: dict[str, Any] = {"query": query, "documents": passages, "top_n": len(passages)}
        if self.spec.model:
            body["model"] = self.spec.model
        return body

    def _batch(self, query: str, passages: list[str]) -> list[float]:
        return call_with_retries(
            lambda: self.parse(self._post(self.body(query, passages)), len(passages)),
            self._retry,
            where=self._where,
            failed=f"{self._where}: rerank request failed",
        )

    def _post(self, body: dict[str, Any]) -> Any:
        response = post_json(self._http, self.url, body, self._key, *self._secrets)
        if response.status_code >= 400:
            raise BackendError(f"{self._where}: {http_error(response, self._key, *self._secrets)}")
        try:
            return response.json()
        except ValueError as exc:
            raise BackendError(
                f"{self._where}: rerank reply is not JSON: {snippet(response, self._key, *self._secrets)}"
            ) from exc

    def parse(self, payload: Any, expected: int) -> list[float]:
        """Scores in passage order from either shape (servers sort results by score)."""
        items = payload.get("results") if isinstance(payload, dict) else payload
        if not isinstance(items, list):
            raise BackendError(
                f"{self._where}: expected a list of results ({self.spec.api} shape), got {type(items).__name__}"
            )
        out: list[float | None] = [None] * expected
        try:
            for item in items:
                index = int(item["index"])
                value = item["relevance_score"] if "relevance_score" in item else item["score"]
                if not 0 <= index < expected or not math.isfinite(float(value)):
                    raise ValueError(f"index {index} or score {value} out of range")
                out[index] = float(value)
        except (KeyError, TypeError, ValueError) as exc:
            raise BackendError(
                f"{self._where}: malformed rerank result ({exc}); expected {{index, relevance_score or score}}"
            ) from exc
        missing = [i for i, s in enumerate(out) if s is None]
        if missing:
            raise BackendError(f"{self._where}: no score for passages {missing[:10]} of {expected}")
        return [float(s) for s in out if s is not None]


# ── the bundled LLM's token probabilities ─────────────────────────────────

RELEVANCE_SYSTEM = "You judge whether a passage helps answer a question."


def relevance_request(query: str, passage: str) -> ChatRequest:
    """The question first, so every passage's prompt shares one prefix (llama.cpp's KV
    cache keeps it); one reply token, read as probabilities."""
    user = (
        f"Question: {query}\n\nPassage:\n{passage}\n\n"
        "Does the passage contain information that answers the question? Reply with one word: Yes or No."
    )
    return one_word_request(RELEVANCE_SYSTEM, user, reuse_prefix=True)


def yes_no_logodds(top_logprobs: Sequence[tuple[str, float]]) -> float:
    """log P(Yes) - log P(No) of the first token; 0 (undecided) when neither is listed."""
    logodds = word_logodds(top_logprobs, "yes", "no")
    return 0.0 if logodds is None else logodds


class LLMReranker:
    """Relevance from a chat model's first-token probabilities (offline with the bundled
    model). Cost: one prompt per passage, of which only the passage part is evaluated
    anew (the shared question prefix stays in llama.cpp's KV cache); bound it with the
    retrieval config's `rerank_top_n` and this reranker's `max_passage_tokens`."""

    def __init__(self, chat: ChatModel, max_passage_tokens: int = 256) -> None:
        self.chat = chat
        self.max_passage_tokens = max_passage_tokens
        self.results: list[ChatResult] = []  # the last `scores` call's replies (cost, cache hits)

    def cut(self, passage: str) -> str:
        """The passage cut to about `max_passage_tokens` tokens: measured with the model's
        tokenizer when it offers one (`prompt_tokens`), else 4 characters a token."""
        limit = self.max_passage_tokens * 4
        passage = passage[:limit]
        inner = getattr(self.chat, "inner", None)  # CachedChat wraps the model that tokenizes
        measure = getattr(self.chat, "prompt_tokens", None) or getattr(inner, "prompt_tokens", None)
        if measure is None:
            return passage
        for _ in range(3):  # shrink in proportion until it fits
            n = int(measure((Message("user", passage),))) - 8  # the template's own tokens
            if n <= self.max_passage_tokens:
                break
            passage = passage[: max(1, int(len(passage) * self.max_passage_tokens / n * 0.95))]
        return passage

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        reqs = [relevance_request(query, self.cut(p)) for p in passages]
        replies = self.chat.complete_many(reqs)
        self.results = []
        out: list[float] = []
        for reply in replies:
            if isinstance(reply, Exception):
                raise BackendError(f"LLM rerank failed: {reply}") from reply
            self.results.append(reply)
            out.append(yes_no_logodds(reply.top_logprobs))
        return out


def make_reranker(
    spec: RerankerSpec,
    *,
    embedder: Embedder | None = None,
    lake_root: Path | None = None,
    chat: ChatModel | None = None,
) -> Reranker:
    """The reranker `spec` names. "embedding" needs the index's `embedder`; "llm" uses
    `chat` when given, else loads `spec.model` (default: the bundled GGUF) with its replies
    cached under `<lake_root>/cache/llm`."""
    if spec.backend == "http":
        return HostedReranker(spec)
    if spec.backend == "embedding":
        if embedder is None:
            raise ValueError('reranker backend "embedding" needs the index\'s embedder')
        return EmbeddingReranker(embedder)
    if chat is None:
        if lake_root is None:
            raise ValueError('reranker backend "llm" needs a chat model or the lake (for the bundled model)')
        chat = make_chat_model(LLMSpec(model=spec.model) if spec.model else LLMSpec(), lake_root)
    return LLMReranker(chat, spec.max_passage_tokens)
