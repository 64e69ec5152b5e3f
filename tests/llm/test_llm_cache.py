"""CachedChat over a real OpenAI-compatible server: a second run never reaches the model."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

from kohaku_rag.llm.base import ChatModel, ChatRequest, ChatResult, Message
from kohaku_rag.llm.cache import CachedChat, request_key
from kohaku_rag.llm.openai_compat import OpenAIChat
from tests.support.at_once import open_at_once
from tests.support.chat_server import ChatServer, Fault

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


def ask(text: str, seed: int = 0) -> ChatRequest:
    return ChatRequest((Message("user", text),), seed=seed, json_schema=SCHEMA)


def chat(url: str) -> OpenAIChat:
    return OpenAIChat(url, "test-model", api_key_env=None, max_retries=0)


def test_second_run_is_served_from_cache_even_in_another_process(tmp_path: Path) -> None:
    reqs = [ask(f"q{i}", seed=i) for i in range(5)]
    with ChatServer() as srv:
        first = CachedChat(chat(srv.base_url), tmp_path)
        assert isinstance(first, ChatModel)
        fresh = first.complete_many(reqs)
        assert (first.hits, first.misses, len(srv.requests)) == (0, 5, 5)
        assert all(isinstance(r, ChatResult) and not r.cached for r in fresh)
        first.close()

        again = CachedChat(chat(srv.base_url), tmp_path)
        cached = again.complete_many(reqs)
        assert (again.hits, again.misses, len(srv.requests)) == (5, 0, 5)
        assert [r.text for r in cached] == [r.text for r in fresh]
        assert all(r.cached for r in cached)
        assert cached[2].prompt_tokens == fresh[2].prompt_tokens
        url = srv.base_url

    # The server is gone: a new process still gets every reply, so the model is never called.
    script = textwrap.dedent(f"""
        import json
        from pathlib import Path
        from kohaku_rag.llm.base import ChatRequest, Message
        from kohaku_rag.llm.cache import CachedChat
        from kohaku_rag.llm.openai_compat import OpenAIChat
        schema = {SCHEMA!r}
        reqs = [ChatRequest((Message("user", f"q{{i}}"),), seed=i, json_schema=schema) for i in range(5)]
        llm = CachedChat(OpenAIChat({url!r}, "test-model", api_key_env=None, max_retries=0), Path({str(tmp_path)!r}))
        out = llm.complete_many(reqs)
        print(json.dumps({{"hits": llm.hits, "misses": llm.misses, "texts": [r.text for r in out]}}))
    """)
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report == {"hits": 5, "misses": 0, "texts": [r.text for r in fresh]}


def test_key_covers_every_reply_shaping_field_and_errors_are_not_cached(tmp_path: Path) -> None:
    base = ask("x")
    variants = [
        replace(base, seed=1),
        replace(base, temperature=0.7),
        replace(base, max_tokens=9),
        replace(base, json_schema=None),
        ChatRequest((Message("user", "y"),), json_schema=SCHEMA),
        ChatRequest((Message("system", "x"),), json_schema=SCHEMA),
        replace(base, top_logprobs=5),
    ]
    keys = {request_key("m", base)} | {request_key("m", v) for v in variants} | {request_key("other", base)}
    assert len(keys) == len(variants) + 2

    with ChatServer() as srv:
        srv.script("flaky", Fault(status=404, error="no such model"))
        llm = CachedChat(chat(srv.base_url), tmp_path)
        first = llm.complete_many([ask("flaky"), ask("dup"), ask("dup")])
        assert isinstance(first[0], Exception) and first[1] == first[2]
        assert len(srv.attempts("dup")) == 1  # identical requests in a batch asked once
        second = llm.complete_many([ask("flaky"), ask("dup")])
        assert isinstance(second[0], ChatResult) and not second[0].cached  # the failure was retried
        assert second[1].cached and len(srv.attempts("flaky")) == 2
        assert llm.complete(ask("flaky")).cached


def test_first_token_logprobs_are_cached_and_old_caches_are_upgraded(tmp_path: Path) -> None:
    import apsw

    verdict = ChatRequest((Message("user", "verdict"),), max_tokens=1, top_logprobs=3)
    old = ask("old")
    with ChatServer() as srv:
        model = chat(srv.base_url)
        # A cache file written before replies carried logprobs: its rows stay readable.
        db = apsw.Connection(str(tmp_path / "llm.sqlite"))
        db.execute(
            "CREATE TABLE responses (key TEXT PRIMARY KEY, model_id TEXT NOT NULL, text TEXT NOT NULL, "
            "prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, seconds REAL NOT NULL, "
            "created REAL NOT NULL)"
        )
        db.execute(
            "INSERT INTO responses VALUES (?, 'm', '{\"answer\": \"kept\"}', 3, 2, 0.5, 0)",
            (request_key(model.model_id, old),),
        )
        db.close()
        srv.script("verdict", Fault(content="True", top_logprobs=(("True", -0.2), ("False", -1.8))))
        llm = CachedChat(model, tmp_path)
        assert llm.complete(old).text == '{"answer": "kept"}' and llm.complete(old).top_logprobs == ()
        fresh = llm.complete(verdict)
        assert fresh.top_logprobs == (("True", -0.2), ("False", -1.8)) and not fresh.cached
        again = CachedChat(chat(srv.base_url), tmp_path).complete(verdict)
        assert again.cached and again.top_logprobs == fresh.top_logprobs
        assert len(srv.attempts("verdict")) == 1 and len(srv.attempts("old")) == 0


class EchoChat:
    """An instant inner model (the cache under test is the subject, not the model): each
    thread's next cache read or write follows at once, so unserialized use collides."""

    model_id = "echo"
    context_window = 4096
    max_concurrent = 8

    def complete(self, req: ChatRequest) -> ChatResult:
        return ChatResult(req.messages[-1].content.upper(), 1, 1, 0.0)

    def complete_many(self, reqs: list[ChatRequest]) -> list[ChatResult | Exception]:
        return [self.complete(r) for r in reqs]


def test_question_threads_share_the_cache_without_a_threading_violation(tmp_path: Path) -> None:
    """Questions are asked from several threads at once through one CachedChat (one apsw
    connection): its reads and writes must be serialized, or apsw refuses a connection busy
    in another thread (as a diverse-rerank config run does)."""
    from concurrent.futures import ThreadPoolExecutor

    llm = CachedChat(EchoChat(), tmp_path)
    reqs = [ask(f"question {i}", seed=i) for i in range(400)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _round in range(3):  # misses, then hits: reads and writes interleave
            results = list(pool.map(llm.complete, reqs))
            assert [r.text for r in results] == [f"QUESTION {i}" for i in range(400)]
    assert (llm.misses, llm.hits) == (400, 800)
    llm.close()


def test_processes_opening_a_new_cache_at_once_all_start(tmp_path: Path) -> None:
    """Processes opening a lake's new LLM cache at the same moment all start: a column one of
    them adds is not added twice ("duplicate column name"). Each connection here is its own,
    as each process's is; a barrier lines their opening up."""

    def open_cache(folder: Path) -> str:
        llm = CachedChat(EchoChat(), folder)
        text = llm.complete(ask("hello")).text
        llm.close()
        return text

    assert all(texts == ["HELLO"] * 6 for texts in open_at_once(tmp_path, open_cache))


def test_a_cache_written_before_confidences_gains_its_columns(tmp_path: Path) -> None:
    """An old cache file (no top_logprobs, no mean_logprob) is migrated in place and keeps its rows."""
    import apsw

    db = apsw.Connection(str(tmp_path / "llm.sqlite"))
    db.execute(
        "CREATE TABLE responses (key TEXT PRIMARY KEY, model_id TEXT NOT NULL, text TEXT NOT NULL,"
        " prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, seconds REAL NOT NULL,"
        " created REAL NOT NULL)"
    )
    req = ask("hello")
    db.execute("INSERT INTO responses VALUES (?, 'echo', 'OLD', 1, 1, 0.0, 0.0)", (request_key("echo", req),))
    db.close()
    llm = CachedChat(EchoChat(), tmp_path)
    result = llm.complete(req)
    assert result.text == "OLD" and result.cached
    llm.close()
