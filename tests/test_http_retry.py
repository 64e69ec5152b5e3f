"""The shared HTTP retry pieces, against a real server on 127.0.0.1 where HTTP is involved."""

from __future__ import annotations

import email.utils
import json
import random
import threading
from collections import deque
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from kohaku_rag.errors import BackendError
from kohaku_rag.http_retry import (
    RetryPolicy,
    call_with_retries,
    normalise_base_url,
    parse_retry_after,
    post_json,
    read_api_key,
    redact,
)

SECRET = "sk-http-retry-9d41c0"


class _Scripted(BaseHTTPRequestHandler):
    """Answers each POST with the next (status, headers, body) of the server's script."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        status, headers, body = self.server.script.popleft()  # type: ignore[attr-defined]
        self.server.seen += 1  # type: ignore[attr-defined]
        data = body.encode()
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    srv.script = deque()  # type: ignore[attr-defined]
    srv.seen = 0  # type: ignore[attr-defined]
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_delay_bounds_for_both_jitters() -> None:
    random.seed(7)
    equal = RetryPolicy(backoff_base=1.0, backoff_max=4.0)
    full = RetryPolicy(backoff_base=1.0, backoff_max=4.0, jitter="full")
    for attempt, step in [(0, 1.0), (1, 2.0), (2, 4.0), (5, 4.0)]:
        for _ in range(50):
            assert step / 2 <= equal.delay(attempt, None) <= step
            assert 0.0 <= full.delay(attempt, None) <= step
    # Retry-After is a floor, capped at max_wait.
    assert equal.delay(0, 3.0) >= 3.0
    assert RetryPolicy(max_wait=10.0).delay(0, 3600.0) == 10.0
    with pytest.raises(ValueError, match="jitter"):
        RetryPolicy(jitter="none")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)


def test_parse_retry_after_forms() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(email.utils.formatdate(now + 12, usegmt=True), now=now) == 12.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 -0000", now=1445412480.0) == 0.0
    assert parse_retry_after("nan") is None and parse_retry_after("") is None


def test_read_api_key_and_redact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOHAKU_TEST_RETRY_KEY", f"  {SECRET}\n")
    assert read_api_key("KOHAKU_TEST_RETRY_KEY") == SECRET
    assert read_api_key(None) is None
    monkeypatch.setenv("KOHAKU_TEST_RETRY_KEY", "   ")
    with pytest.raises(BackendError, match="environment variable KOHAKU_TEST_RETRY_KEY is not set"):
        read_api_key("KOHAKU_TEST_RETRY_KEY", "the test client")
    assert redact(f"bad key {SECRET}", SECRET) == "bad key [redacted]"
    assert redact("no key here", None) == "no key here"


def test_normalise_base_url() -> None:
    assert normalise_base_url(" http://h:1/ ") == "http://h:1/v1"
    assert normalise_base_url("https://h/api/v1/") == "https://h/api/v1"
    with pytest.raises(ValueError, match="must start with http"):
        normalise_base_url("http:///v1")


def test_retries_then_succeeds_and_keeps_the_key_out(server: ThreadingHTTPServer) -> None:
    server.script.extend(
        [  # type: ignore[attr-defined]
            (429, [("Retry-After", "0")], f"slow down {SECRET}"),
            (503, [], "busy"),
            (200, [], json.dumps({"ok": True})),
        ]
    )
    url = f"http://127.0.0.1:{server.server_port}/v1/x"
    policy = RetryPolicy(max_retries=2, backoff_base=0.01)
    with httpx.Client(timeout=5.0) as client:
        got = call_with_retries(lambda: post_json(client, url, {}, SECRET).json(), policy, url, "x failed")
        assert got == {"ok": True} and server.seen == 3  # type: ignore[attr-defined]

        server.script.extend([(500, [], f"echo {SECRET}")] * 2)  # type: ignore[attr-defined]
        with pytest.raises(BackendError) as caught:
            call_with_retries(lambda: post_json(client, url, {}, SECRET), RetryPolicy(1, 0.01), url, "x failed")
    message = str(caught.value)
    assert message.startswith("x failed after 2 attempts; last error: HTTP 500")
    assert SECRET not in message and "[redacted]" in message


def test_a_client_error_is_returned_not_retried(server: ThreadingHTTPServer) -> None:
    server.script.append((404, [], "no such model"))  # type: ignore[attr-defined]
    url = f"http://127.0.0.1:{server.server_port}/v1/x"
    with httpx.Client(timeout=5.0) as client:
        response = call_with_retries(lambda: post_json(client, url, {}, None), RetryPolicy(3, 0.01), url, "x")
    assert response.status_code == 404 and server.seen == 1  # type: ignore[attr-defined]
