"""One base for the tests' fake HTTP servers: a `ThreadingHTTPServer` on 127.0.0.1 at a port
the OS picks, served from a daemon thread, started and stopped by `with` (or `start`/`stop`),
and a handler base that reads and writes JSON without logging to the test output."""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

__all__ = ["JsonHandler", "LocalServer"]


class LocalServer(ABC):
    """A fake server: a subclass says which handler serves it (`handler`); `root` is its
    `http://127.0.0.1:PORT`."""

    _httpd: ThreadingHTTPServer | None = None

    @abstractmethod
    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class, bound to this server's state."""

    @property
    def root(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Self:
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        httpd.daemon_threads = True
        self._httpd = httpd
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler that keeps quiet and speaks JSON."""

    def log_message(self, format: str, *args: Any) -> None:  # keep the test output clean
        pass

    def read_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def lower_headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def send_json(self, status: int, payload: Any, headers: Iterable[tuple[str, str]] = ()) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
