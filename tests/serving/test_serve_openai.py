"""The OpenAI-compatible endpoint through a real uvicorn on 127.0.0.1, with the official
`openai` client: models, a completion with references and url annotations, streaming."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.support.asgi_server import serving
from tests.support.serving_corpus import WATER_QUESTION, WATER_URL


@pytest.fixture()
def base_url(app):
    with serving(app) as url:
        yield url


@pytest.fixture()
def client(base_url):
    with openai.OpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0) as c:
        yield c


def test_models_are_the_configs(client) -> None:
    assert sorted(m.id for m in client.models.list()) == ["default", "fake"]


def test_completion_has_markers_references_and_url_citations(client) -> None:
    done = client.chat.completions.create(
        model="fake",
        messages=[{"role": "system", "content": "be brief"}, {"role": "user", "content": WATER_QUESTION}],
    )
    message = done.choices[0].message
    assert done.model == "fake" and done.choices[0].finish_reason == "stop"
    # the explanation, then the answer with its markers: the order the model writes them
    assert message.content.startswith("seed 0 temperature") and message.content.endswith("0.18 L/kWh [1]")
    refs = message.model_extra["references"]
    assert refs[0]["index"] == 1 and refs[0]["doc_id"] == "water" and "0.18" in refs[0]["quote"]
    assert refs[0]["page"] == 1 and refs[0]["url"] == WATER_URL
    (note,) = message.annotations
    assert note.type == "url_citation" and note.url_citation.url == WATER_URL
    assert message.content[note.url_citation.start_index : note.url_citation.end_index] == "[1]"


def test_streaming_sends_chunks_then_done(client, base_url) -> None:
    stream = client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": WATER_QUESTION}], stream=True
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text.endswith("0.18 L/kWh [1]")
    assert chunks[0].choices[0].delta.role == "assistant"
    last = chunks[-1].choices[0]
    assert last.finish_reason == "stop" and last.delta.model_extra["references"][0]["doc_id"] == "water"
    # on the wire: OpenAI's `data:` lines, progress as comments, then [DONE]
    raw = httpx.post(
        f"{base_url}/v1/chat/completions",
        json={"model": "fake", "messages": [{"role": "user", "content": WATER_QUESTION}], "stream": True},
        timeout=30,
    ).text
    assert raw.rstrip().endswith("data: [DONE]")


def test_unknown_model_is_an_openai_error(client) -> None:
    with pytest.raises(openai.NotFoundError, match="no config 'gpt-9'"):
        client.chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError, match="no user message"):
        client.chat.completions.create(model="fake", messages=[{"role": "system", "content": "hi"}])


def test_streaming_types_the_explanation_and_answer_as_the_model_writes_them(client, qa) -> None:
    """The words arrive as the model writes them: the explanation first (it writes it first),
    then the answer; only the markers wait for the end. Before, the explanation came in one
    piece after the model had finished."""
    qa.stream_pause = 0.02
    stream = client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": WATER_QUESTION}], stream=True
    )
    pieces = [c.choices[0].delta.content for c in stream if c.choices[0].delta.content]
    text = "".join(pieces)
    assert text.startswith("seed 0 temperature") and text.endswith("\n\n0.18 L/kWh [1]")
    typed = []
    for piece in pieces:  # the pieces before the markers: as the model wrote them
        if "[1]" in piece:
            break
        typed.append(piece)
    explanation, _, answer = "".join(typed).partition("\n\n")
    assert explanation.startswith("seed") and answer.startswith("0.18")
    assert len([p for p in typed if p.strip() and p in explanation]) >= 2  # the explanation in pieces too
    assert any(r.body.get("stream") for r in qa.requests)  # the model's reply was streamed to us


def test_a_follow_up_is_answered_from_the_conversation(client, qa) -> None:
    """A follow-up is answered from the whole conversation, not as if it stood alone."""
    done = client.chat.completions.create(
        model="fake",
        messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "How many watts did the A100 GPU draw?"},
            {"role": "assistant", "content": "400 W [1]"},
            {"role": "user", "content": "And the water usage effectiveness?"},
        ],
    )
    assert done.choices[0].message.content.endswith("0.18 L/kWh [1]")
    rewrite = next(r for r in qa.requests if "Conversation so far" in json.dumps(r.body))
    assert "400 W" in json.dumps(rewrite.body) and "be brief" not in json.dumps(rewrite.body)


def test_a_stream_is_typed_before_the_reply_is_complete_and_adds_up_to_the_plain_reply(client, qa) -> None:
    """A stream is typed before the reply is complete, adds up to the plain reply, and honours
    `stream_options.include_usage`."""
    qa.stream_pause = 0.03
    stream = client.chat.completions.create(
        model="fake",
        messages=[{"role": "user", "content": WATER_QUESTION}],
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces: list[str] = []
    model_busy_at_first_piece = None
    chunks = []
    for c in stream:
        chunks.append(c)
        if c.choices and c.choices[0].delta.content:
            if not pieces:  # the model server is still writing its reply (its stream is open)
                model_busy_at_first_piece = qa.in_flight
            pieces.append(c.choices[0].delta.content)
    assert model_busy_at_first_piece == 1
    assert len(pieces) >= 3
    *body, last = chunks
    assert last.choices == [] and last.usage is not None  # OpenAI's usage chunk, after the finish
    assert last.usage.prompt_tokens > 0 and last.usage.completion_tokens > 0
    assert last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens
    assert all(c.usage is None for c in body) and body[-1].choices[0].finish_reason == "stop"

    plain = client.chat.completions.create(model="fake", messages=[{"role": "user", "content": WATER_QUESTION}])
    assert "".join(pieces) == plain.choices[0].message.content
    assert plain.usage.total_tokens == 0  # served again from the stored answers: no model call
    fresh = client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "How many watts did the A100 GPU draw?"}]
    )
    assert fresh.usage.prompt_tokens > 0 and fresh.usage.completion_tokens > 0


def test_stream_options_are_checked(base_url) -> None:
    def post(extra: dict) -> httpx.Response:
        body = {"model": "fake", "messages": [{"role": "user", "content": WATER_QUESTION}], **extra}
        return httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=30)

    for extra, error in [
        ({"stream": True, "stream_options": "usage"}, "stream_options: give an object"),
        ({"stream_options": {"include_usage": True}}, "stream_options: only allowed with stream: true"),
        ({"stream": True, "stream_options": {"include_usage": "yes"}}, "include_usage: give true or false"),
    ]:
        resp = post(extra)
        assert resp.status_code == 400 and error in resp.text, resp.text
    plain = post({"stream": True}).text  # no usage asked: no usage chunk
    assert '"usage"' not in plain and plain.rstrip().endswith("data: [DONE]")
