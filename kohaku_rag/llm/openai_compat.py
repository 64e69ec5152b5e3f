"""An OpenAI-compatible chat client (OpenAI, vLLM, llama.cpp server, Ollama, ...) over httpx.

Async inside so a batch runs `max_concurrent` requests at once; a sync facade outside so
callers (Dagster assets, scripts) need no event loop. Transient failures (429, 5xx,
timeouts, dropped connections, unparseable JSON when a schema was asked for) are retried
with exponential back-off and full jitter, honouring Retry-After. A batch never loses a
request: each slot holds its reply or the exception that ended it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, TypeVar

import httpx

from kohaku_rag.errors import BackendError, RetriesExhausted
from kohaku_rag.http_retry import (
    Retryable,
    RetryPolicy,
    api_url,
    check_one_credential,
    endpoint_id,
    normalise_base_url,
    raise_if_retryable,
    read_api_key,
    redact,
    safe_url,
    url_secrets,
)
from kohaku_rag.http_retry import parse_retry_after as parse_retry_after  # re-exported for callers
from kohaku_rag.llm.base import (
    ChatRequest,
    ChatResult,
    ContextOverflowError,
    Message,
    UnusableReply,
    extract_json,
    one_reply,
)
from kohaku_rag.llm.reply_stream import ReplySink, reply_sink

log = logging.getLogger(__name__)

Structured = Literal["json_schema", "json_object", "none"]
# Strongest first; a server that rejects one is asked with the next.
_MODES: tuple[Structured, ...] = ("json_schema", "json_object", "none")
_OVERFLOW = re.compile(
    r"context[ _-]?length|context window|context size|maximum context|too many tokens"
    r"|prompt is too long|input is too long|exceeds? the (?:available )?context",
    re.IGNORECASE,
)
_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]+")
# A chat completion is a few KB (a long reply with logprobs, some hundred KB): a larger body
# is a misbehaving server or proxy, and is not read into memory whole.
MAX_REPLY_BYTES = 8_000_000
_WIRE_HEADERS = ("content-encoding", "content-length", "transfer-encoding")
T = TypeVar("T")


class _FormatUnsupported(Exception):
    """The server refused the response_format we sent."""


class _NotJSON(Retryable):
    """The model's reply holds no JSON object: worth another try (sampling differs), but when
    every try fails the endpoint worked and the model answered: an UnusableReply."""


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, even inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1) as pool:  # a loop is running here (notebook)
        return pool.submit(asyncio.run, coro).result()


class OpenAIChat:
    """`ChatModel` over an OpenAI-compatible `/v1/chat/completions` endpoint.

    The API key is read once from the environment variable `api_key_env` (None: the
    server needs no key) and is never logged nor put in an exception message; nor are
    credentials written into `base_url` (`user:key@host`, `?api-key=...`). `model_id`
    names the endpoint (without credentials) as well as the model, so the response cache
    never serves one server's reply for another's.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        max_concurrent: int = 4,
        timeout: float = 120.0,
        max_retries: int = 5,
        context_window: int = 32768,
        structured: Structured = "json_schema",
        *,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        max_wait: float = 300.0,
        max_reply_bytes: int = MAX_REPLY_BYTES,
    ) -> None:
        if structured not in _MODES:
            raise ValueError(f"structured={structured!r} is not one of {', '.join(_MODES)}")
        if max_concurrent < 1 or max_retries < 0 or timeout <= 0:
            raise ValueError("max_concurrent must be >= 1, max_retries >= 0 and timeout > 0")
        self.model = model
        self.base_url = normalise_base_url(base_url)
        mode = "" if structured == "json_schema" else f"#{structured}"
        self.model_id = f"openai:{model}@{endpoint_id(self.base_url)}{mode}"
        self.context_window = context_window
        self.max_concurrent = max_concurrent
        self.timeout = timeout
        self.max_reply_bytes = max_reply_bytes
        # Full jitter: a batch's burst of 429s spreads over the window instead of returning at once.
        self.retry = RetryPolicy(
            max_retries=max_retries,
            backoff_base=backoff_base,
            backoff_max=backoff_max,
            max_wait=max_wait,
            jitter="full",
        )
        self._url = api_url(self.base_url, "chat/completions")
        self._secrets = url_secrets(self.base_url)
        # Learned per client: once a server rejects a response_format, stop sending it.
        self._mode: Structured = structured
        self._api_key = read_api_key(api_key_env, "the chat model")
        check_one_credential(self.base_url, self._api_key, api_key_env)

    def __repr__(self) -> str:
        return f"OpenAIChat(base_url={safe_url(self.base_url)!r}, model={self.model!r})"

    @property
    def structured(self) -> Structured:
        """The structured-output mode in use now (it falls back when the server refuses)."""
        return self._mode

    # ---- public sync facade -------------------------------------------------------------

    def complete(self, req: ChatRequest) -> ChatResult:
        return one_reply(self.complete_many([req]))

    def complete_many(self, reqs: Sequence[ChatRequest]) -> list[ChatResult | Exception]:
        reqs = list(reqs)
        for r in reqs:
            if not isinstance(r, ChatRequest):
                raise TypeError(f"complete_many takes ChatRequest records, got {type(r).__name__}")
        if not reqs:
            return []
        return run_sync(self.acomplete_many(reqs))

    # ---- async core ---------------------------------------------------------------------

    async def acomplete_many(self, reqs: Sequence[ChatRequest]) -> list[ChatResult | Exception]:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        limits = httpx.Limits(max_connections=self.max_concurrent, max_keepalive_connections=self.max_concurrent)
        sem = asyncio.Semaphore(self.max_concurrent)
        # One request's reply goes to the reply sink as it is written (the ask page, a chat
        # client); a batch's replies would interleave, so a batch is never streamed.
        sink = reply_sink() if len(reqs) == 1 else None
        async with httpx.AsyncClient(headers=headers, timeout=self.timeout, limits=limits) as client:
            outcomes = await asyncio.gather(
                *(self._complete_one(client, sem, r, sink) for r in reqs), return_exceptions=True
            )
        return [o if isinstance(o, (ChatResult, Exception)) else BackendError(repr(o)) for o in outcomes]

    async def _complete_one(
        self, client: httpx.AsyncClient, sem: asyncio.Semaphore, req: ChatRequest, sink: ReplySink | None = None
    ) -> ChatResult:
        failures = 0
        while True:
            mode = self._mode
            try:
                async with sem:  # the slot is held for the HTTP call only, not the back-off
                    return await self._attempt(client, req, mode, sink)
            except _FormatUnsupported:
                self._fall_back_from(mode)  # not a failure: the next mode is a different ask
                continue
            except Retryable as exc:
                failures += 1
                if failures > self.retry.max_retries:
                    last = self._redact(exc.reason)
                    gave_up = f"{self._where}: gave up after {failures} attempts; last error: {last}"
                    raise (UnusableReply if isinstance(exc, _NotJSON) else RetriesExhausted)(gave_up) from None
                delay = self.retry.delay(failures - 1, exc.retry_after)
                log.warning(
                    "%s: attempt %d failed (%s); retrying in %.2fs",
                    self._where,
                    failures,
                    self._redact(exc.reason),
                    delay,
                )
                await asyncio.sleep(delay)

    async def _attempt(
        self, client: httpx.AsyncClient, req: ChatRequest, mode: Structured, sink: ReplySink | None = None
    ) -> ChatResult:
        started = time.perf_counter()
        payload = self._payload(req, mode)
        if sink is not None and "logprobs" not in payload:  # logprobs come whole, not streamed
            payload["stream"] = True
            payload["stream_options"] = {"include_usage": True}  # else a stream reports no tokens
        try:
            resp = await self._post(client, payload, sink if payload.get("stream") else None)
        except httpx.TimeoutException:
            raise Retryable(f"no reply within {self.timeout:g}s") from None
        except httpx.TransportError as exc:
            raise Retryable(f"connection failed: {type(exc).__name__}: {self._redact(str(exc))}") from None
        seconds = time.perf_counter() - started
        if resp.status_code == 200:
            return self._parse_reply(resp, req, seconds)
        body = self._redact(resp.text[:1000])
        status = resp.status_code
        raise_if_retryable(resp, body[:300])
        if 400 <= status < 500 and _OVERFLOW.search(body):
            raise ContextOverflowError(f"{self._where}: prompt does not fit the context window: HTTP {status}: {body}")
        if status == 400 and mode != "none" and "response_format" in body.lower():
            raise _FormatUnsupported()
        raise BackendError(f"{self._where}: HTTP {status}: {body}")

    async def _post(
        self, client: httpx.AsyncClient, payload: dict[str, Any], sink: ReplySink | None = None
    ) -> httpx.Response:
        """The reply, its body read as it streams in and refused past `max_reply_bytes`. A
        streamed reply (SSE chunks) sends each piece of text to `sink` as it arrives and is
        returned as the chat completion it adds up to."""
        async with client.stream("POST", self._url, json=payload) as resp:
            declared = resp.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > self.max_reply_bytes:
                self._too_large(f"{int(declared)} bytes declared")
            if sink is not None and resp.status_code == 200 and "event-stream" in resp.headers.get("content-type", ""):
                return await self._read_stream(resp, sink)
            body = bytearray()
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > self.max_reply_bytes:
                    self._too_large(f"over {self.max_reply_bytes} bytes read")
            # The body is decoded already (gzip): the headers that describe the wire form go.
            headers = [(k, v) for k, v in resp.headers.items() if k.lower() not in _WIRE_HEADERS]
            return httpx.Response(resp.status_code, headers=headers, content=bytes(body), request=resp.request)

    async def _read_stream(self, resp: httpx.Response, sink: ReplySink) -> httpx.Response:
        """OpenAI's streamed chunks (`data: {...}` lines, then `data: [DONE]`) read into one
        chat completion, each content piece sent to `sink` on the way."""
        text: list[str] = []
        finish: str | None = None
        usage: dict[str, Any] = {}
        size = 0
        async for line in resp.aiter_lines():
            size += len(line)
            if size > self.max_reply_bytes:
                self._too_large(f"over {self.max_reply_bytes} bytes read")
            if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                continue
            try:
                data = json.loads(line[5:])
            except ValueError:
                raise Retryable(f"a streamed chunk is not JSON: {self._redact(line[:200])!r}") from None
            usage = data.get("usage") or usage
            for choice in data.get("choices") or []:
                piece = (choice.get("delta") or {}).get("content") or ""
                if piece:
                    text.append(piece)
                    sink(piece)
                finish = choice.get("finish_reason") or finish
        message = {"role": "assistant", "content": "".join(text)}
        body = {"choices": [{"index": 0, "message": message, "finish_reason": finish or "stop"}], "usage": usage}
        return httpx.Response(200, json=body, request=resp.request)

    def _too_large(self, seen: str) -> None:
        raise BackendError(
            f"{self._where}: the reply body is larger than the {self.max_reply_bytes}-byte cap ({seen}); "
            "stopped reading it. A chat completion is a few KB: check the server (or a proxy in front of it)"
        )

    def _parse_reply(self, resp: httpx.Response, req: ChatRequest, seconds: float) -> ChatResult:
        try:
            data = resp.json()
            choice = data["choices"][0]
            text = choice["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError):
            # A proxy's HTML error page or a half-written body: worth another try.
            raise Retryable(f"reply is not a chat completion: {self._redact(resp.text[:200])!r}") from None
        if req.json_schema is not None:
            found = extract_json(text)
            if found is None:
                if choice.get("finish_reason") == "length":
                    raise UnusableReply(
                        f"{self._where}: the reply reached max_tokens={req.max_tokens} before its JSON "
                        "was complete; raise max_tokens"
                    )
                raise _NotJSON(f"reply is not valid JSON: {text[:200]!r}")
            text = found
        top: tuple[tuple[str, float], ...] = ()
        if req.top_logprobs > 0:
            found_top = _first_token_top_logprobs(choice)
            if found_top is None:
                # A server without logprobs support ignores the field: asking again will not help.
                raise BackendError(
                    f"{self._where}: the server did not return logprobs for the reply's first token "
                    f"although top_logprobs={req.top_logprobs} was asked for; use a server and model "
                    "that support `logprobs` (e.g. OpenAI, vLLM, llama.cpp server)"
                )
            top = found_top[: req.top_logprobs]
        mean: float | None = None
        if req.reply_logprobs:
            tokens = ((choice.get("logprobs") or {}).get("content")) or []
            values = [float(t["logprob"]) for t in tokens if isinstance(t, dict) and "logprob" in t]
            mean = sum(values) / len(values) if values else None
        usage = data.get("usage") or {}
        # Servers that keep KV caches say how much of the prompt they reused (OpenAI's
        # `prompt_tokens_details.cached_tokens`); without it the split is unknown.
        reused = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
        prompt = int(usage.get("prompt_tokens") or 0)
        evaluated = max(0, prompt - reused) if isinstance(reused, int) else None
        return ChatResult(
            text=text,
            prompt_tokens=prompt,
            completion_tokens=int(usage.get("completion_tokens") or 0),
            seconds=seconds,
            cached=False,
            prompt_tokens_evaluated=evaluated,
            top_logprobs=top,
            mean_logprob=mean,
        )

    # ---- helpers ------------------------------------------------------------------------

    def _payload(self, req: ChatRequest, mode: Structured) -> dict[str, Any]:
        messages = [{"role": m.role, "content": _content(m)} for m in req.messages]
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": req.temperature,
            "max_tokens": req.max_tokens,
            "seed": req.seed,
        }
        if req.top_logprobs > 0 or req.reply_logprobs:
            # Only when asked: some servers and models refuse the logprobs fields with a 400.
            payload["logprobs"] = True
        if req.top_logprobs > 0:
            payload["top_logprobs"] = req.top_logprobs
        schema = req.schema
        if schema is None:
            return payload
        if mode == "json_schema":
            name = _SCHEMA_NAME.sub("_", str(schema.get("title") or "reply"))[:64] or "reply"
            payload["response_format"] = {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
            return payload
        # Without server-side schemas the model must be told the shape in the prompt.
        payload["messages"] = _with_schema_instruction(messages, req.schema_text or "")
        if mode == "json_object":
            payload["response_format"] = {"type": "json_object"}
        return payload

    def _fall_back_from(self, mode: Structured) -> None:
        weaker = _MODES[_MODES.index(mode) + 1]
        if _MODES.index(weaker) > _MODES.index(self._mode):
            log.warning("%s: server refused response_format %s; using %s", self._where, mode, weaker)
            self._mode = weaker

    @property
    def _where(self) -> str:
        return f"{self.model} at {safe_url(self.base_url)}"

    def _redact(self, text: str) -> str:
        return redact(text, self._api_key, *self._secrets)


def _content(message: Message) -> Any:
    """A plain string, or the text and image parts of a vision request."""
    if not message.images:
        return message.content
    return [
        {"type": "text", "text": message.content},
        *({"type": "image_url", "image_url": {"url": url}} for url in message.images),
    ]


def _first_token_top_logprobs(choice: dict[str, Any]) -> tuple[tuple[str, float], ...] | None:
    """The first generated token's alternatives as (token, logprob), most likely first.

    OpenAI's shape: choice["logprobs"]["content"][0]["top_logprobs"] = [{"token", "logprob"}, ...].
    None when the reply carries none (the server ignored `logprobs`) or in another shape.
    """
    try:
        entries = choice["logprobs"]["content"][0]["top_logprobs"]
        pairs = [(str(e["token"]), float(e["logprob"])) for e in entries]
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    if not pairs:
        return None
    # Servers list them most likely first already; sort anyway, the caller relies on it.
    return tuple(sorted(pairs, key=lambda pair: pair[1], reverse=True))


def _with_schema_instruction(messages: list[dict[str, str]], schema_json: str) -> list[dict[str, str]]:
    instruction = (
        "Reply with one JSON object and nothing else (no code fences, no prose). "
        f"It must follow this JSON Schema:\n{schema_json}"
    )
    out = [dict(m) for m in messages]
    if out and out[0]["role"] == "system":
        out[0]["content"] = f"{out[0]['content']}\n\n{instruction}"
    else:
        out.insert(0, {"role": "system", "content": instruction})
    return out
