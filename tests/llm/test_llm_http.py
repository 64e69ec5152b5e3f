"""OpenAIChat against a real HTTP server on 127.0.0.1 that injects faults."""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import socket
import time

import pytest

from kohaku_rag.errors import BackendError
from kohaku_rag.llm.base import ChatModel, ChatRequest, ChatResult, ContextOverflowError, Message
from kohaku_rag.llm.openai_compat import OpenAIChat, normalise_base_url, parse_retry_after
from tests.support.chat_server import ChatServer, Fault, hang, malformed_json, rate_limited, server_error
from tests.support.waiting import wait_until

KEY_ENV = "KOHAKU_TEST_LLM_KEY"
SECRET = "sk-test-5f3a9c1e77d04b2b"
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "seed": {"type": "integer"}},
    "required": ["answer"],
}


def ask(text: str, *, seed: int = 0, schema: dict | None = SCHEMA, max_tokens: int = 64) -> ChatRequest:
    return ChatRequest(
        (Message("system", "Answer the question."), Message("user", text)),
        max_tokens=max_tokens,
        seed=seed,
        json_schema=schema,
    )


def client(srv: ChatServer, **kw) -> OpenAIChat:
    opts = dict(
        model="test-model",
        api_key_env=KEY_ENV,
        max_concurrent=3,
        timeout=5.0,
        max_retries=3,
        backoff_base=0.02,
        backoff_max=0.1,
    )
    opts.update(kw)
    return OpenAIChat(srv.base_url, **opts)


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)


def test_batch_with_faults_loses_nothing_and_bounds_concurrency() -> None:
    with ChatServer(default_delay=0.08, required_key=SECRET) as srv:
        srv.script("q0", rate_limited("1"))
        srv.script("q1", server_error(500), server_error(502))
        srv.script("q2", server_error(503))
        srv.script("q3", malformed_json())
        srv.script("q4", *[malformed_json()] * 4)  # 1 try + 3 retries, all bad
        srv.script("q5", *[server_error(500)] * 4)
        srv.script("q6", Fault(status=404, error="model 'test-model' does not exist"))
        llm = client(srv)
        assert isinstance(llm, ChatModel)
        reqs = [ask(f"q{i}", seed=i) for i in range(12)]
        results = llm.complete_many(reqs)

        assert len(results) == 12
        failed = {i for i, r in enumerate(results) if isinstance(r, Exception)}
        assert failed == {4, 5, 6}
        for i, r in enumerate(results):
            if i in failed:
                assert isinstance(r, BackendError) and not isinstance(r, ContextOverflowError)
                continue
            assert isinstance(r, ChatResult) and not r.cached
            assert json.loads(r.text) == {"answer": f"q{i}", "seed": i}  # each reply in its own slot
            assert r.prompt_tokens == 4 and r.completion_tokens > 0
        assert "after 4 attempts" in str(results[4]) and "not valid JSON" in str(results[4])
        assert "after 4 attempts" in str(results[5]) and "HTTP 500" in str(results[5])
        assert "HTTP 404" in str(results[6]) and "does not exist" in str(results[6])

        counts = {f"q{i}": len(srv.attempts(f"q{i}")) for i in range(12)}
        assert counts == {
            "q0": 2,
            "q1": 3,
            "q2": 2,
            "q3": 2,
            "q4": 4,
            "q5": 4,
            "q6": 1,
            **{f"q{i}": 1 for i in range(7, 12)},
        }
        first, second = srv.attempts("q0")
        assert second.at - first.at >= 0.98  # Retry-After: 1 honoured, not the 0.1 s back-off
        assert 2 <= srv.max_in_flight <= 3
        assert all(r.headers["authorization"] == f"Bearer {SECRET}" for r in srv.requests)
        sent = srv.attempts("q7")[0].body
        assert sent["response_format"]["type"] == "json_schema"
        assert sent["response_format"]["json_schema"]["schema"] == SCHEMA
        assert sent["seed"] == 7 and sent["max_tokens"] == 64 and sent["model"] == "test-model"


def test_timeout_is_retried() -> None:
    with ChatServer() as srv:
        srv.script("slow", hang(1.0))
        llm = client(srv, timeout=0.3)
        started = time.monotonic()
        result = llm.complete(ask("slow"))
        assert json.loads(result.text)["answer"] == "slow"
        assert len(srv.attempts("slow")) == 2
        assert time.monotonic() - started < 1.0  # the retry did not wait for the hung reply


def test_timeouts_exhaust_retries_into_an_error() -> None:
    with ChatServer() as srv:
        srv.script("slow", *[hang(0.5)] * 2)
        llm = client(srv, timeout=0.2, max_retries=1)
        with pytest.raises(BackendError, match=r"after 2 attempts.*no reply within 0.2s"):
            llm.complete(ask("slow"))


def test_retry_after_http_date_is_honoured() -> None:
    not_before = math.ceil(time.time()) + 1  # HTTP dates have whole seconds
    with ChatServer() as srv:
        srv.script("later", rate_limited(email.utils.formatdate(not_before, usegmt=True)))
        result = client(srv).complete(ask("later"))
        assert json.loads(result.text)["answer"] == "later"
        first, second = srv.attempts("later")
        assert first.wall < not_before <= second.wall + 0.01 < not_before + 0.5


def test_parse_retry_after() -> None:
    now = 1_700_000_000.0
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after(email.utils.formatdate(now + 30, usegmt=True), now=now) == 30.0
    assert parse_retry_after(email.utils.formatdate(now - 30, usegmt=True), now=now) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_structured_output_falls_back_to_json_object_then_prompting() -> None:
    with ChatServer(supported_formats=frozenset({"json_object"})) as srv:
        llm = client(srv)
        results = llm.complete_many([ask(f"f{i}") for i in range(4)])
        assert [json.loads(r.text)["answer"] for r in results] == [f"f{i}" for i in range(4)]
        assert llm.structured == "json_object"
        final = srv.attempts("f0")[-1].body
        assert final["response_format"] == {"type": "json_object"}
        assert "JSON Schema" in final["messages"][0]["content"]
        assert final["messages"][0]["content"].startswith("Answer the question.")
        # Learned once: a later batch goes straight to json_object.
        before = len(srv.requests)
        llm.complete(ask("again"))
        assert len(srv.requests) == before + 1

    with ChatServer(supported_formats=frozenset()) as srv:
        llm = client(srv)
        result = llm.complete(ask("plain"))
        assert llm.structured == "none"
        assert json.loads(result.text) == {"answer": "plain", "seed": 0}  # fences stripped
        kinds = [(r.body.get("response_format") or {}).get("type") for r in srv.attempts("plain")]
        assert kinds == ["json_schema", "json_object", None]
        free = llm.complete(ask("free text", schema=None))
        assert free.text == "echo: free text"


def test_context_overflow_raises_without_retry() -> None:
    long_question = " ".join(["word"] * 200)
    with ChatServer(context_limit=100) as srv:
        llm = client(srv)
        results = llm.complete_many([ask("short"), ask(long_question)])
        assert isinstance(results[0], ChatResult)
        assert isinstance(results[1], ContextOverflowError)
        assert "maximum context length is 100" in str(results[1])
        assert len(srv.attempts(long_question)) == 1
        with pytest.raises(ContextOverflowError):
            llm.complete(ask(long_question))


def test_reply_cut_at_max_tokens_is_reported_not_retried() -> None:
    with ChatServer() as srv:
        srv.script("cut", Fault(content='{"answer": "abc', finish_reason="length"))
        with pytest.raises(BackendError, match="max_tokens=64 before its JSON was complete"):
            client(srv).complete(ask("cut"))
        assert len(srv.attempts("cut")) == 1


def test_api_key_never_appears_in_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = "sk-wrong-0d9e8f7a6b5c"
    monkeypatch.setenv(KEY_ENV, wrong)
    with ChatServer(required_key=SECRET) as srv:
        llm = client(srv)
        with pytest.raises(BackendError) as info:
            llm.complete(ask("hello"))
        # The server echoes the bad key back; the client must not pass it on.
        assert wrong in json.dumps([r.headers for r in srv.requests])
        assert "HTTP 401" in str(info.value) and wrong not in str(info.value)
        assert wrong not in repr(llm)

    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(BackendError, match=f"environment variable {KEY_ENV} is not set"):
        OpenAIChat("http://127.0.0.1:9", "m", api_key_env=KEY_ENV)
    with ChatServer() as srv:
        OpenAIChat(srv.base_url, "m", api_key_env=None).complete(ask("open"))
        assert "authorization" not in srv.attempts("open")[0].headers


def test_connection_refused_is_retried_then_reported() -> None:
    with socket.socket() as s:  # a port that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = OpenAIChat(
        f"http://127.0.0.1:{port}/v1/", "m", api_key_env=None, max_retries=2, backoff_base=0.01, backoff_max=0.02
    )
    results = llm.complete_many([ask("a"), ask("b")])
    assert all(
        isinstance(r, BackendError) and "after 3 attempts" in str(r) and "connection failed" in str(r) for r in results
    )


def test_base_url_with_or_without_v1() -> None:
    assert normalise_base_url("http://h:8000") == "http://h:8000/v1"
    assert normalise_base_url("http://h:8000/v1/") == "http://h:8000/v1"
    assert normalise_base_url("https://api.example.com/openai/v1") == "https://api.example.com/openai/v1"
    with pytest.raises(ValueError, match="must start with http"):
        normalise_base_url("h:8000")
    with ChatServer() as srv:
        r = OpenAIChat(f"{srv.base_url}/v1", "m", api_key_env=None).complete(ask("v1", schema=None))
        assert r.text == "echo: v1"


def test_sync_facade_works_inside_a_running_event_loop() -> None:
    with ChatServer() as srv:
        llm = client(srv)

        async def inside() -> ChatResult:
            return llm.complete(ask("loop", schema=None))

        assert asyncio.run(inside()).text == "echo: loop"


def test_request_is_hashable_and_keeps_the_schema_property_order() -> None:
    schema = {"type": "object", "properties": {"why": {"type": "string"}, "answer": {"type": "string"}}}
    a, b = ask("x", schema=schema), ask("x", schema=json.dumps(schema, indent=2))
    assert a == b and hash(a) == hash(b) and isinstance(a.json_schema, str)
    # A grammar-constrained decoder writes properties in schema order: "why" must stay first.
    assert list(a.schema["properties"]) == ["why", "answer"]
    with pytest.raises(ValueError, match="at least one message"):
        ChatRequest(())
    with pytest.raises(ValueError, match="role"):
        Message("robot", "hi")  # type: ignore[arg-type]


def test_top_logprobs_are_asked_for_and_returned_most_likely_first() -> None:
    with ChatServer() as srv:
        # Scripted out of order: the client must sort them.
        srv.script("verdict", Fault(content="yes", top_logprobs=(("no", -1.2), ("yes", -0.3), ("maybe", -4.0))))
        req = ChatRequest((Message("user", "verdict"),), top_logprobs=5)
        r = client(srv).complete(req)
        body = srv.attempts("verdict")[0].body
        assert body["logprobs"] is True and body["top_logprobs"] == 5
        assert r.text == "yes"
        assert r.top_logprobs == (("yes", -0.3), ("no", -1.2), ("maybe", -4.0))


def test_no_logprobs_are_asked_for_by_default() -> None:
    with ChatServer() as srv:
        r = client(srv).complete(ask("plain", schema=None))
        body = srv.attempts("plain")[0].body
        assert "logprobs" not in body and "top_logprobs" not in body
        assert r.top_logprobs == ()


def test_server_without_logprobs_is_reported_not_retried() -> None:
    with ChatServer() as srv:
        srv.script("nolp", Fault(omit_logprobs=True))
        req = ChatRequest((Message("user", "nolp"),), top_logprobs=3)
        with pytest.raises(BackendError) as info:
            client(srv).complete(req)
        message = str(info.value)
        assert "did not return logprobs" in message and "top_logprobs=3" in message
        assert "test-model" in message and "vLLM" in message
        assert len(srv.attempts("nolp")) == 1


def test_reply_logprobs_give_the_mean_token_logprob_and_are_cached(tmp_path) -> None:
    from kohaku_rag.llm import CachedChat

    with ChatServer() as srv:
        srv.script("conf", Fault(content="True", top_logprobs=(("True", -0.4), ("False", -1.5))))
        req = ChatRequest((Message("user", "conf"),), reply_logprobs=True)
        r = CachedChat(client(srv), tmp_path).complete(req)
        body = srv.attempts("conf")[0].body
        assert body["logprobs"] is True and "top_logprobs" not in body
        assert r.mean_logprob == -0.4 and not r.cached  # one token, log-probability -0.4
        again = CachedChat(client(srv), tmp_path).complete(req)
        assert again.cached and again.mean_logprob == -0.4
        # a plain request is another cache entry and carries none
        assert client(srv).complete(ChatRequest((Message("user", "conf"),))).mean_logprob is None


def test_a_huge_reply_body_is_refused_without_reading_it_whole() -> None:
    """A 20 MB reply (a misbehaving server or proxy) is refused at the cap, not read whole:
    declared by Content-Length, and streamed without one."""
    with ChatServer() as srv:
        srv.script("huge", Fault(content="x" * 20_000_000))
        with pytest.raises(BackendError, match=r"larger than the 8000000-byte cap \(20000\d+ bytes declared\)"):
            client(srv, max_retries=0).complete(ask("huge", schema=None))
        assert len(srv.attempts("huge")) == 1  # not retried: asking again gets the same
        assert client(srv).complete(ask("small", schema=None)).text == "echo: small"

    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    sent = []

    class Endless(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # no Content-Length: the body ends when the server closes

        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            total = 0
            try:
                while total < 20_000_000:
                    self.wfile.write(b" " * 65536)
                    total += 65536
            except OSError:
                pass  # the client hung up
            sent.append(total)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        host, port = server.server_address[:2]
        llm = OpenAIChat(f"http://{host}:{port}", "m", api_key_env=None, max_retries=0, max_reply_bytes=1_000_000)
        with pytest.raises(BackendError, match=r"larger than the 1000000-byte cap \(over 1000000 bytes read\)"):
            llm.complete(ask("endless", schema=None))
        wait_until(lambda: sent, 5, "the server to see the client hang up")
        assert sent[0] < 20_000_000  # the client stopped reading; the server gave up early
    finally:
        server.shutdown()
        server.server_close()
