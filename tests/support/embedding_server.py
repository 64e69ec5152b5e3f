"""A real HTTP embeddings server on 127.0.0.1 for the OpenAI and Jina backend tests.

Speaks `/v1/embeddings` (both dialects: it reads `dimensions` and Jina's `task`), returns
deterministic, deliberately un-normalised vectors in *reversed* order (so clients must
sort by `index`), records every request, and replays a queue of one-shot faults:

    "429"      rate limited, with Retry-After: 1
    "500"      internal error
    "slow"     sleeps past the client's timeout before answering
    "401-echo" unauthorised, echoing the Authorization header back in the body
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

DEFAULT_DIM = 24
SLOW_SECONDS = 2.0


def expected_vector(text: str, task: str | None, dim: int) -> np.ndarray:
    """What the server returns for `text`, before the client normalises it."""
    seed = int.from_bytes(hashlib.sha256(f"{task}|{text}".encode()).digest()[:8], "little")
    return 3.0 * np.random.default_rng(seed).standard_normal(dim)


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float


@dataclass
class EmbeddingServer:
    faults: deque[str] = field(default_factory=deque)
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    httpd: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self.httpd is not None
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> EmbeddingServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append(
                        Recorded(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.monotonic())
                    )
                    fault = server.faults.popleft() if server.faults else None
                if self.path.split("?")[0] != "/v1/embeddings":  # a query string (?api-key=) is allowed
                    return self._reply(404, {"error": f"no route {self.path}"})
                if fault == "429":
                    return self._reply(429, {"error": "rate limited"}, {"Retry-After": "1"})
                if fault == "500":
                    return self._reply(500, {"error": "internal error"})
                if fault == "401-echo":
                    return self._reply(401, {"error": f"bad key {self.headers.get('Authorization')}"})
                if fault == "slow":
                    time.sleep(SLOW_SECONDS)
                dim = int(body.get("dimensions") or DEFAULT_DIM)
                task = body.get("task")
                data = [
                    {"object": "embedding", "index": i, "embedding": expected_vector(t, task, dim).tolist()}
                    for i, t in enumerate(body["input"])
                ]
                self._reply(200, {"object": "list", "model": body.get("model"), "data": data[::-1]})

            def _reply(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
                raw = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test); nothing to answer

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
