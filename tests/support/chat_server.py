"""A real OpenAI-compatible HTTP server on 127.0.0.1 for the LLM client tests.

It answers `POST /v1/chat/completions` by echoing the last user message (streamed as
OpenAI's SSE chunks when the request asks for `stream`), and can be
scripted per request key (the last user message) to misbehave: rate limits with
Retry-After, 5xx, hangs longer than the client's timeout, malformed JSON content,
context overflows, a refused response_format and missing logprobs. Faults can also be
injected across the board: `outage` (every request a 503), `failure_rate` (that share of
requests a 500, drawn from a seeded generator) and `fail_when` (a predicate on the request
key). It records every request, and the largest number of requests it was serving at once.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.local_http import JsonHandler, LocalServer


@dataclass(frozen=True)
class Fault:
    """One scripted reply. Defaults mean 'answer normally'."""

    status: int = 200
    error: str | None = None  # message of an OpenAI-style error body (non-200)
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0  # seconds to sleep before answering
    content: str | None = None  # assistant content to send instead of the echo
    finish_reason: str = "stop"
    # The first token's alternatives sent when the request asks for logprobs (None: a default
    # pair); `omit_logprobs` answers without any, like a server that ignores the field.
    top_logprobs: tuple[tuple[str, float], ...] | None = None
    omit_logprobs: bool = False


def rate_limited(retry_after: str) -> Fault:
    return Fault(status=429, error="Rate limit reached, slow down", headers=(("Retry-After", retry_after),))


def server_error(status: int = 500) -> Fault:
    return Fault(status=status, error="The server had an error while processing your request")


def hang(seconds: float) -> Fault:
    return Fault(delay=seconds)


def malformed_json() -> Fault:
    return Fault(content='{"answer": "unterminated')


@dataclass(frozen=True)
class Recorded:
    key: str
    at: float  # time.monotonic() on arrival
    wall: float  # time.time() on arrival, to compare with HTTP dates
    headers: dict[str, str]
    body: dict[str, Any]
    status: int


@dataclass
class ChatServer(LocalServer):
    """Start with `with ChatServer() as srv:`; `srv.base_url` has no /v1 suffix."""

    supported_formats: frozenset[str] = frozenset({"json_schema", "json_object"})
    context_limit: int | None = None  # words of prompt; more gives a context-length 400
    required_key: str | None = None  # when set, other bearer tokens get a 401 echoing them
    default_delay: float = 0.0
    outage: bool = False  # every request gets a 503
    failure_rate: float = 0.0  # this share of requests gets a 500
    fail_when: Callable[[str], bool] | None = None  # requests whose key matches get a 500
    seed: int = 0
    streams: bool = True  # a request with "stream": true gets SSE chunks (False: a server that ignores it)
    stream_pause: float = 0.005
    requests: list[Recorded] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)  # every request's path, query string included
    max_in_flight: int = 0
    # When set, usage says this many prompt tokens were reused from the server's KV cache
    # (OpenAI's prompt_tokens_details.cached_tokens), as servers with prompt caching do.
    cached_prompt_tokens: int | None = None
    _in_flight: int = 0
    _scripts: dict[str, deque[Fault]] = field(default_factory=lambda: defaultdict(deque))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _random: random.Random | None = None

    def script(self, key: str, *faults: Fault) -> None:
        """The next requests whose last user message is `key` get these replies, in order."""
        with self._lock:
            self._scripts[key].extend(faults)

    def attempts(self, key: str) -> list[Recorded]:
        with self._lock:
            return [r for r in self.requests if r.key == key]

    @property
    def base_url(self) -> str:
        return self.root

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _make_handler(self)

    # ---- request handling (called from handler threads) ---------------------------------

    @property
    def in_flight(self) -> int:
        """Requests being answered now (a streamed reply counts until its last chunk is sent)."""
        with self._lock:
            return self._in_flight

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _next_fault(self, key: str) -> Fault:
        with self._lock:
            queue = self._scripts.get(key)
            if queue:
                return queue.popleft()
            if self.outage:
                return server_error(503)
            if self.fail_when is not None and self.fail_when(key):
                return server_error(500)
            if self.failure_rate > 0:
                if self._random is None:
                    self._random = random.Random(self.seed)
                if self._random.random() < self.failure_rate:
                    return server_error(500)
            return Fault(delay=self.default_delay)

    def respond(self, headers: dict[str, str], body: dict[str, Any]) -> tuple[Fault, int, dict[str, Any]]:
        messages = body.get("messages") or []
        # A multimodal message is keyed by its text parts (images ride along in `body`).
        users = [text_of(m) for m in messages if m.get("role") == "user"]
        key = users[-1] if users else ""
        fault = self._next_fault(key)
        status, payload = self._reply(fault, headers, body, messages, key)
        with self._lock:
            self.requests.append(Recorded(key, time.monotonic(), time.time(), headers, body, status))
        return fault, status, payload

    def _reply(
        self, fault: Fault, headers: dict[str, str], body: dict[str, Any], messages: list[dict[str, str]], key: str
    ) -> tuple[int, dict[str, Any]]:
        auth = headers.get("authorization", "")
        if self.required_key is not None and auth != f"Bearer {self.required_key}":
            token = auth.removeprefix("Bearer ")
            return 401, _error(f"Incorrect API key provided: {token}", "invalid_api_key")
        if fault.status != 200:
            return fault.status, _error(fault.error or "error", None)
        fmt = (body.get("response_format") or {}).get("type")
        if fmt is not None and fmt not in self.supported_formats:
            return 400, _error(f"response_format type '{fmt}' is not supported by this server", None)
        prompt_words = sum(len(text_of(m).split()) for m in messages)
        if self.context_limit is not None and prompt_words > self.context_limit:
            return 400, _error(
                f"This model's maximum context length is {self.context_limit} tokens. "
                f"However, your messages resulted in {prompt_words} tokens.",
                "context_length_exceeded",
            )
        content = fault.content if fault.content is not None else self._echo(body, messages, key)
        choice: dict[str, Any] = {
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": fault.finish_reason,
        }
        if body.get("logprobs") and not fault.omit_logprobs:
            choice["logprobs"] = _logprobs(content, fault.top_logprobs)
        return 200, {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_words,
                "completion_tokens": len(content.split()),
                "total_tokens": prompt_words + len(content.split()),
            }
            | (
                {}
                if self.cached_prompt_tokens is None
                else {"prompt_tokens_details": {"cached_tokens": min(self.cached_prompt_tokens, prompt_words)}}
            ),
        }

    @staticmethod
    def _echo(body: dict[str, Any], messages: list[dict[str, str]], key: str) -> str:
        wants_json = body.get("response_format") is not None or any(
            "JSON Schema" in m.get("content", "") for m in messages if m.get("role") == "system"
        )
        if not wants_json:
            return f"echo: {key}"
        obj = json.dumps({"answer": key, "seed": body.get("seed")})
        # Like a chatty model told the shape only in the prompt: fences and prose around it.
        return obj if body.get("response_format") else f"Sure! Here it is:\n```json\n{obj}\n```"


def text_of(message: dict[str, Any]) -> str:
    """A message's text; a multimodal message's text parts (its images ride along in the body)."""
    content = message.get("content") or ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if part.get("type") == "text")


DEFAULT_TOP_LOGPROBS: tuple[tuple[str, float], ...] = (("echo", -0.1), ("other", -2.5))


def _logprobs(content: str, top: tuple[tuple[str, float], ...] | None) -> dict[str, Any]:
    """OpenAI's `logprobs` object for a reply, with alternatives for its first token only."""
    words = content.split()
    top = DEFAULT_TOP_LOGPROBS if top is None else top
    alternatives = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top]
    first = words[0] if words else ""
    logprob = next((lp for t, lp in top if t == first), top[0][1] if top else 0.0)
    return {
        "content": [{"token": first, "logprob": logprob, "bytes": list(first.encode()), "top_logprobs": alternatives}]
    }


def _error(message: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": code}}


def _make_handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.read_body()
            server.paths.append(self.path)
            if self.path.split("?")[0].rstrip("/") != "/v1/chat/completions":
                self.send_json(404, {"error": {"message": f"no route {self.path}"}})
                return
            server._enter()
            try:
                fault, status, payload = server.respond(self.lower_headers(), json.loads(raw))
                if fault.delay:
                    time.sleep(fault.delay)
                body = json.loads(raw)
                if body.get("stream") and status == 200 and server.streams:
                    self._send_stream(payload, body.get("stream_options"))
                else:
                    self.send_json(status, payload, fault.headers)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout) before we answered
            finally:
                server._leave()

        def _send_stream(self, payload: dict[str, Any], stream_options: dict[str, Any] | None) -> None:
            """The reply as OpenAI's streamed chunks, a few characters each, `stream_pause`
            seconds apart, the usage when `stream_options` asks for it, then `data: [DONE]`;
            the connection closes at the end."""
            choice = payload["choices"][0]
            content = choice["message"]["content"]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            pieces = [content[i : i + 6] for i in range(0, len(content), 6)]
            for i, piece in enumerate(pieces):
                last = i == len(pieces) - 1
                delta = {"role": "assistant", "content": piece} if i == 0 else {"content": piece}
                chunk = {
                    "choices": [
                        {"index": 0, "delta": delta, "finish_reason": choice["finish_reason"] if last else None}
                    ]
                }
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
                time.sleep(server.stream_pause)
            if (stream_options or {}).get("include_usage"):  # OpenAI: a last chunk, no choices
                usage = {"choices": [], "usage": payload["usage"]}
                self.wfile.write(f"data: {json.dumps(usage)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()

    return Handler
