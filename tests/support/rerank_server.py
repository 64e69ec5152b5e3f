"""A real HTTP rerank server on 127.0.0.1 speaking the common `/rerank` shapes.

POST /v1/rerank or /v2/rerank (Jina, Cohere, llama.cpp server): {model, query, documents,
top_n} -> {"results": [{"index", "relevance_score"}]}; POST /rerank (Hugging Face TEI):
{query, texts} -> [{"index", "score"}]. A passage scores the share of the query's words it
contains, and results come back sorted by score, as real servers send them. `faults` holds
statuses to answer the next requests with (429 carries Retry-After: 0); `override` is a
body to send instead of the scores (a malformed server).
"""

from __future__ import annotations

import json
import re
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.local_http import JsonHandler, LocalServer


def overlap(query: str, text: str) -> float:
    words = set(re.findall(r"\w+", query.lower()))
    have = set(re.findall(r"\w+", text.lower()))
    return len(words & have) / max(len(words), 1)


@dataclass
class RerankServer(LocalServer):
    required_key: str | None = None
    faults: deque[int] = field(default_factory=deque)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    max_in_flight: int = 0
    delay: float = 0.0
    override: Any = None  # when set, every 200 reply's body (a malformed server)
    _in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler(self)

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        with self._lock:
            self.requests.append((path, body))
            fault = self.faults.popleft() if self.faults else 200
        if fault != 200:
            return fault, {"error": f"status {fault}"}
        if self.required_key is not None and headers.get("authorization") != f"Bearer {self.required_key}":
            return 401, {"error": "bad key"}
        if self.override is not None:
            return 200, self.override
        if path == "/rerank":  # TEI
            texts = body["texts"]
            scored = [{"index": i, "score": overlap(body["query"], t)} for i, t in enumerate(texts)]
            return 200, sorted(scored, key=lambda r: -r["score"])
        if path in ("/v1/rerank", "/v2/rerank"):
            docs = body["documents"]
            scored = [{"index": i, "relevance_score": overlap(body["query"], d)} for i, d in enumerate(docs)]
            ranked = sorted(scored, key=lambda r: -r["relevance_score"])[: body.get("top_n", len(docs))]
            return 200, {"model": body.get("model"), "results": ranked}
        return 404, {"error": f"no route {path}"}


def _handler(server: RerankServer) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_POST(self) -> None:
            with server._lock:
                server._in_flight += 1
                server.max_in_flight = max(server.max_in_flight, server._in_flight)
            try:
                if server.delay:
                    threading.Event().wait(server.delay)
                body = json.loads(self.read_body() or b"{}")
                status, payload = server.answer(
                    self.path.split("?")[0], self.lower_headers(), body
                )  # ?api-key= allowed
                self.send_json(status, payload, [("Retry-After", "0")] if status == 429 else [])
            finally:
                with server._lock:
                    server._in_flight -= 1

    return Handler
