"""Bearer-key auth and the request body cap, as plain ASGI middleware (they run before
routing, so no route can forget them); the per-client rate of a route (feedback)."""

from __future__ import annotations

import hmac
import ipaddress
import threading
import time
from collections import deque
from collections.abc import Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kohaku_rag.errors import KohakuError
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


class BodyTooLarge(KohakuError):
    pass


class BodyLimit:
    """Refuse a body over `limit` bytes (over `wider[path]` on the paths named there): at
    once when Content-Length says so, else as soon as the streamed body passes it (413
    either way)."""

    def __init__(self, app: ASGIApp, limit: int, wider: Mapping[str, int] | None = None) -> None:
        self.app = app
        self.limit = limit
        self.wider = dict(wider or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.wider.get(scope["path"], self.limit)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await self._refuse(limit, scope, receive, send)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
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
                await self._refuse(limit, scope, receive, send)

    async def _refuse(self, limit: int, scope: Scope, receive: Receive, send: Send) -> None:
        message = f"request body over {limit} bytes"
        await error_response(413, message)(scope, receive, send)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def proxy_networks(proxies: tuple[str, ...]) -> tuple[Network, ...]:
    """The `--trusted-proxy` values as networks (an address is a network of one); ValueError
    naming the value that is neither."""
    networks = []
    for proxy in proxies:
        try:
            networks.append(ipaddress.ip_network(proxy.strip(), strict=False))
        except ValueError:
            raise ValueError(
                f"--trusted-proxy {proxy}: give an IP address or network (e.g. 127.0.0.1 or 10.0.0.0/8) "
                "of a reverse proxy in front of this server"
            ) from None
    return tuple(networks)


class ClientAddress:
    """The address a request counts as coming from. The direct peer, unless that peer is a
    trusted proxy: then the right-most `X-Forwarded-For` entry not itself a trusted proxy
    (entries to its left are whatever the client wrote, so they cannot be believed)."""

    def __init__(self, proxies: tuple[str, ...]) -> None:
        self.networks = proxy_networks(proxies)

    def of(self, scope: Scope) -> str:
        client = scope.get("client")
        peer = str(client[0]) if client else ""
        if not self._trusted(peer):
            return peer
        forwarded = b",".join(v for k, v in scope["headers"] if k == b"x-forwarded-for")
        for entry in reversed(forwarded.decode("latin-1").split(",")):
            entry = entry.strip()
            if entry and not self._trusted(entry):
                return entry
        return peer  # no header (or only proxies in it): the proxy itself asked

    def _trusted(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False  # not an address (a unix socket, a malformed entry): never a proxy
        return any(ip in network for network in self.networks)


class ClientRate:
    """At most `per_minute` requests per client address in any 60 s (a sliding window),
    kept in this process: a flood from one client is refused before it reaches the store.
    Behind a proxy every client shares the proxy's address unless the proxy is trusted
    (ServeSettings.trusted_proxies), so set the limit for all or name the proxy."""

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
