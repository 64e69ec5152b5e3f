"""Bearer-key auth and the request body cap, as plain ASGI middleware (they run before
routing, so no route can forget them); the per-client rate of a route (feedback)."""

from __future__ import annotations

import hmac
import threading
import time
from collections import deque

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kohaku_rag.serving.errors import error_response

# The ask page's own files hold no data: a browser loads them before it can send a key.
PUBLIC_PATHS = frozenset({"/", "/favicon.ico"})
PUBLIC_PREFIXES = ("/static/",)


class BearerAuth:
    """With a key, every request but the page's files needs `Authorization: Bearer <key>`."""

    def __init__(self, app: ASGIApp, key: str) -> None:
        self.app = app
        self.key = key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _public(scope["path"]) or scope["method"] == "OPTIONS":
            await self.app(scope, receive, send)
            return
        given = dict(scope["headers"]).get(b"authorization", b"")
        scheme, _, token = given.partition(b" ")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self.key):
            response = error_response(
                401,
                "missing or wrong API key: send 'Authorization: Bearer <key>'",
                headers={"WWW-Authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


class BodyTooLarge(Exception):
    pass


class BodyLimit:
    """Refuse a body over `limit` bytes: at once when Content-Length says so, else as soon
    as the streamed body passes it (413 either way)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self._refuse(scope, receive, send)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except BodyTooLarge:
            if not started:
                await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = f"request body over {self.limit} bytes"
        await error_response(413, message)(scope, receive, send)


class ClientRate:
    """At most `per_minute` requests per client address in any 60 s (a sliding window),
    kept in this process: a flood from one client is refused before it reaches the store.
    Behind a proxy every client shares the proxy's address, so set the limit for all."""

    def __init__(self, per_minute: int) -> None:
        self.per_minute = per_minute
        self._seen: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def wait_seconds(self, client: str) -> float:
        """0 when the request may go on (it is counted), else seconds until it may."""
        now = time.monotonic()
        with self._lock:
            if len(self._seen) > 10_000:  # forget clients idle for a minute
                self._seen = {k: v for k, v in self._seen.items() if v and now - v[-1] < 60}
            times = self._seen.setdefault(client, deque())
            while times and now - times[0] >= 60:
                times.popleft()
            if len(times) >= self.per_minute:
                return 60 - (now - times[0])
            times.append(now)
            return 0.0
