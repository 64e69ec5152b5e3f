"""The OpenAI-compatible endpoint through a real uvicorn on 127.0.0.1, with the official
`openai` client: models, a completion with references and url annotations, streaming."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from asgi_server import serving
from serving_corpus import WATER_QUESTION, WATER_URL


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
    assert message.content.startswith("0.18") and "[1]" in message.content
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
    assert text.startswith("0.18") and "[1]" in text
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


def test_streaming_types_the_answer_as_the_model_writes_it(client, qa) -> None:
    """Fails on main: the whole content came in one chunk after the model had finished."""
    qa.stream_pause = 0.02
    stream = client.chat.completions.create(
        model="fake", messages=[{"role": "user", "content": WATER_QUESTION}], stream=True
    )
    pieces = [c.choices[0].delta.content for c in stream if c.choices[0].delta.content]
    text = "".join(pieces)
    assert text.startswith("0.18 L/kWh [1]")
    typed = []
    for piece in pieces:  # the pieces before the markers: the answer as the model wrote it
        if "[1]" in piece:
            break
        typed.append(piece)
    assert len(typed) >= 2 and "".join(typed).startswith("0.18")
    assert any(r.body.get("stream") for r in qa.requests)  # the model's reply was streamed to us


def test_a_follow_up_is_answered_from_the_conversation(client, qa) -> None:
    """Fails on main: only the last message was answered, as if it stood alone."""
    done = client.chat.completions.create(
        model="fake",
        messages=[
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "How many watts did the A100 GPU draw?"},
            {"role": "assistant", "content": "400 W [1]"},
            {"role": "user", "content": "And the water usage effectiveness?"},
        ],
    )
    assert done.choices[0].message.content.startswith("0.18")
    rewrite = next(r for r in qa.requests if "Conversation so far" in json.dumps(r.body))
    assert "400 W" in json.dumps(rewrite.body) and "be brief" not in json.dumps(rewrite.body)
