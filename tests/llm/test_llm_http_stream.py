"""An OpenAI-compatible backend streams its reply to the reply sink (the ask page and chat
clients show it as it is written), through a real HTTP server on 127.0.0.1: the pieces add
up to the reply the answerer parses and it counts its tokens; a server that ignores `stream`
still answers; calls without a sink, with logprobs, or in a batch are not streamed."""

from __future__ import annotations

import json

from test_llm_http import KEY_ENV, SECRET, ask

from kohaku_rag.llm.base import ChatRequest, Message
from kohaku_rag.llm.openai_compat import OpenAIChat
from kohaku_rag.llm.reply_stream import streaming_reply
from tests.support.chat_server import ChatServer


def chat(srv: ChatServer) -> OpenAIChat:
    return OpenAIChat(srv.base_url, "test-model", api_key_env=KEY_ENV, timeout=5.0, max_retries=0)


def test_a_reply_reaches_the_sink_piece_by_piece(monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    with ChatServer() as srv:
        pieces: list[str] = []
        with streaming_reply(pieces.append):
            result = chat(srv).complete(ask("what is streamed?"))
        assert len(pieces) > 3 and "".join(pieces) == result.text
        assert json.loads(result.text)["answer"] == "what is streamed?"
        assert srv.requests[-1].body["stream"] is True
        quiet = chat(srv).complete(ask("no sink here"))  # no sink: a plain request
        assert "stream" not in srv.requests[-1].body and json.loads(quiet.text)["answer"] == "no sink here"


def test_a_server_that_ignores_stream_still_answers(monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    with ChatServer(streams=False) as srv:
        pieces: list[str] = []
        with streaming_reply(pieces.append):
            result = chat(srv).complete(ask("plain JSON back"))
        assert not pieces and json.loads(result.text)["answer"] == "plain JSON back"


def test_logprobs_and_batches_are_not_streamed(monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    with ChatServer() as srv:
        pieces: list[str] = []
        with streaming_reply(pieces.append):
            chat(srv).complete(ChatRequest((Message("user", "true?"),), max_tokens=1, top_logprobs=2))
            chat(srv).complete_many([ask("one"), ask("two")])
        assert not pieces and not any(r.body.get("stream") for r in srv.requests)


def test_a_streamed_reply_counts_its_tokens(monkeypatch) -> None:
    """A streamed reply asks for the usage chunk and records its tokens."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    with ChatServer() as srv:
        with streaming_reply(lambda _piece: None):
            streamed = chat(srv).complete(ask("count me"))
        assert srv.requests[-1].body["stream_options"] == {"include_usage": True}
        plain = chat(srv).complete(ask("count me"))
        assert streamed.text == plain.text
        assert (streamed.prompt_tokens, streamed.completion_tokens) == (plain.prompt_tokens, plain.completion_tokens)
        assert streamed.prompt_tokens > 0 and streamed.completion_tokens > 0
