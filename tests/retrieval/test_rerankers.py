"""Rerankers: a hosted /rerank endpoint in each common shape (a real server on 127.0.0.1),
and the LLM's yes/no token probabilities (through a real OpenAI-compatible HTTP server)."""

from __future__ import annotations

import pytest

from kohaku_rag.errors import BackendError, RetriesExhausted
from kohaku_rag.llm.base import Message
from kohaku_rag.llm.openai_compat import OpenAIChat
from kohaku_rag.retrieval.rerankers import (
    HostedReranker,
    LLMReranker,
    RerankerSpec,
    make_reranker,
    relevance_request,
    yes_no_logodds,
)
from tests.support.chat_server import ChatServer, Fault
from tests.support.rerank_server import RerankServer

QUERY = "power usage effectiveness of the data center"
PASSAGES = [
    "The cafeteria served lunch.",
    "The data center reported a power usage effectiveness of 1.1.",
    "Power was measured at the data center.",
]


@pytest.mark.parametrize(
    ("api", "path"), [("jina", "/v1/rerank"), ("cohere", "/v2/rerank"), ("llamacpp", "/v1/rerank")]
)
def test_jina_cohere_llamacpp_shape_scores_in_passage_order(api: str, path: str) -> None:
    with RerankServer() as server:
        reranker = make_reranker(RerankerSpec(url=server.root + path, api=api, model="m"))  # type: ignore[arg-type]
        scores = reranker.scores(QUERY, PASSAGES)
    # The server sends results sorted by score; they come back aligned with the passages.
    assert scores[1] > scores[2] > scores[0]
    sent_path, body = server.requests[0]
    assert sent_path == path and body["documents"] == PASSAGES and body["model"] == "m"


def test_tei_shape() -> None:
    with RerankServer() as server:
        scores = make_reranker(RerankerSpec(url=server.root + "/rerank", api="tei")).scores(QUERY, PASSAGES)
    assert scores[1] > scores[2] > scores[0]
    assert server.requests[0][1]["texts"] == PASSAGES and "documents" not in server.requests[0][1]


def test_batches_run_concurrently_and_keep_order() -> None:
    passages = [f"passage {i} " + ("data center" if i % 3 == 0 else "lunch") for i in range(10)]
    with RerankServer(delay=0.2) as server:
        spec = RerankerSpec(url=server.root + "/v1/rerank", batch_size=2, max_concurrent=4)
        scores = HostedReranker(spec).scores(QUERY, passages)
    assert len(server.requests) == 5 and server.max_in_flight >= 2
    assert [i for i, s in enumerate(scores) if s > 0] == [0, 3, 6, 9]


def test_retries_429_and_5xx_then_scores(monkeypatch: pytest.MonkeyPatch) -> None:
    with RerankServer() as server:
        server.faults.extend([429, 503])
        scores = make_reranker(RerankerSpec(url=server.root + "/v1/rerank", max_retries=2)).scores(QUERY, PASSAGES)
        assert len(server.requests) == 3 and scores[1] == max(scores)
        server.faults.extend([500, 500, 500])
        with pytest.raises(RetriesExhausted, match="rerank request failed after 3 attempts"):
            make_reranker(RerankerSpec(url=server.root + "/v1/rerank", max_retries=2)).scores(QUERY, PASSAGES)


def test_key_from_the_environment_and_a_401_names_the_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RERANK_KEY", "secret-123")
    with RerankServer(required_key="secret-123") as server:
        ok = RerankerSpec(url=server.root + "/v1/rerank", api_key_env="RERANK_KEY")
        assert max(make_reranker(ok).scores(QUERY, PASSAGES)) > 0
        monkeypatch.setenv("RERANK_KEY", "wrong-456")
        with pytest.raises(BackendError, match="HTTP 401 \\(check the API key variable\\)") as err:
            make_reranker(ok).scores(QUERY, PASSAGES)
        assert "wrong-456" not in str(err.value)


def test_a_malformed_reply_is_a_clear_error() -> None:
    with RerankServer(override={"results": [{"index": 0, "relevance_score": 0.5}]}) as server:
        with pytest.raises(BackendError, match=r"no score for passages \[1, 2\] of 3"):
            make_reranker(RerankerSpec(url=server.root + "/v1/rerank", max_retries=0)).scores(QUERY, PASSAGES)
        server.override = [{"index": 0, "score": 1.0}]  # TEI's list where Jina's object was expected
        with pytest.raises(BackendError, match="malformed rerank result|no score"):
            make_reranker(RerankerSpec(url=server.root + "/v1/rerank", max_retries=0)).scores(QUERY, PASSAGES)
        server.override = {"results": [{"index": 7, "relevance_score": 1.0}]}
        with pytest.raises(BackendError, match="out of range"):
            make_reranker(RerankerSpec(url=server.root + "/v1/rerank", max_retries=0)).scores(QUERY, PASSAGES)


def test_spec_is_validated() -> None:
    with pytest.raises(ValueError, match='backend "http" needs a url'):
        RerankerSpec(url=None)
    with pytest.raises(ValueError, match="not the key itself"):
        RerankerSpec(url="http://x/rerank", api_key_env="sk-abcdefghijklmnopqrstuvwx123456")


def test_yes_no_logodds_pools_spellings() -> None:
    assert yes_no_logodds([("Yes", -0.1), (" yes", -3.0), ("No", -2.5)]) > 2.0
    assert yes_no_logodds([("No", -0.05), ("Maybe", -4.0)]) == pytest.approx(-4.0 + 0.05)


def test_llm_reranker_reads_yes_no_probabilities_over_http() -> None:
    with ChatServer() as server:
        for passage, (yes, no) in zip(PASSAGES, [(-4.0, -0.1), (-0.1, -4.0), (-1.0, -0.5)], strict=True):
            key = relevance_request(QUERY, passage).messages[-1].content
            server.script(key, Fault(content="Yes", top_logprobs=(("Yes", yes), ("No", no))))
        chat = OpenAIChat(server.base_url, "m", api_key_env=None)
        reranker = LLMReranker(chat, max_passage_tokens=64)
        scores = reranker.scores(QUERY, PASSAGES)
    assert scores == pytest.approx([-3.9, 3.9, -0.5])
    assert len(reranker.results) == 3


def test_llm_prompts_share_the_question_prefix_and_cut_passages() -> None:
    a, b = (relevance_request(QUERY, p).messages for p in ("first passage", "second passage"))
    shared = 0
    while a[-1].content[shared] == b[-1].content[shared]:
        shared += 1
    assert (
        a[0] == b[0] and a[-1].content[:shared].startswith(f"Question: {QUERY}") and "Passage" in a[-1].content[:shared]
    )

    class Counting:  # a tokenizer of one token per word, as a model's `prompt_tokens` would be
        def prompt_tokens(self, messages: tuple[Message, ...]) -> int:
            return sum(len(m.content.split()) for m in messages) + 8

    cut = LLMReranker(Counting(), max_passage_tokens=20).cut("word " * 200)  # type: ignore[arg-type]
    assert 10 <= len(cut.split()) <= 20
