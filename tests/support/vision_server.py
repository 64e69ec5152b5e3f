"""A real OpenAI-compatible vision endpoint on 127.0.0.1 for the captioner tests.

`POST /v1/chat/completions` answers with a description that names the size of the PNG it
was sent (so a test can tell which image a reply belongs to). Replies can be scripted in
order: a 429 with Retry-After, a 5xx, a slow answer. Every request is recorded with its
headers and JSON body, and the server tracks how many it served at once.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.local_http import JsonHandler, LocalServer

DATA_URL_PREFIX = "data:image/png;base64,"


@dataclass(frozen=True)
class Reply:
    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0


@dataclass(frozen=True)
class Seen:
    at: float  # time.monotonic() on arrival
    headers: dict[str, str]
    body: dict[str, Any]
    status: int

    @property
    def image(self) -> bytes:
        """The PNG the client sent as a base64 data URL (asserts that it did)."""
        parts = self.body["messages"][-1]["content"]
        url = next(p["image_url"]["url"] for p in parts if p["type"] == "image_url")
        assert url.startswith(DATA_URL_PREFIX), url[:40]
        return base64.b64decode(url[len(DATA_URL_PREFIX) :], validate=True)


def describe(image: bytes) -> str:
    return f"A chart of {len(image)} bytes with axis iter. (1e4) and error (%)."


@dataclass
class VisionServer(LocalServer):
    """`with VisionServer() as srv:`; `srv.base_url` ends in /v1."""

    default_delay: float = 0.0
    requests: list[Seen] = field(default_factory=list)
    max_in_flight: int = 0
    _in_flight: int = 0
    _script: deque[Reply] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler(self)

    def _serve(self, headers: dict[str, str], body: dict[str, Any]) -> tuple[Reply, dict[str, Any]]:
        with self._lock:
            reply = self._script.popleft() if self._script else Reply(delay=self.default_delay)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
        seen = Seen(time.monotonic(), headers, body, reply.status)
        if reply.delay:
            time.sleep(reply.delay)
        with self._lock:
            self._in_flight -= 1
            self.requests.append(seen)
        if reply.status != 200:
            return reply, {"error": {"message": f"scripted HTTP {reply.status}", "type": "server_error"}}
        content = describe(seen.image)
        return reply, {
            "id": "chatcmpl-vision-test",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        }


def _handler(server: VisionServer) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            raw = self.read_body()
            if self.path != "/v1/chat/completions":
                self.send_json(404, {"error": {"message": f"no route {self.path}"}})
                return
            reply, payload = server._serve(self.lower_headers(), json.loads(raw))
            try:
                self.send_json(reply.status, payload, reply.headers)
            except (BrokenPipeError, ConnectionResetError):
                pass

    return Handler
