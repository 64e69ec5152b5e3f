"""A long chat on `/v1/chat/completions` is answered from its last turns, never refused
for its length: a chat front end sends the whole conversation with every message. Only a
body past the chat cap (4 MB, far beyond any chat) is refused, with a 413 naming it; the
other routes keep their 64 kB cap. Real HTTP to a real uvicorn, the fake model of
tests/support/qa_server.py."""

from __future__ import annotations

import json

import httpx

from kohaku_rag.serving.settings import ServeSettings
from tests.support.asgi_server import serving
from tests.support.serving_corpus import WATER_QUESTION

REPLY = "The measured figure is reported in the second table of the study. " * 23  # ~1,550 characters


def chat(exchanges: int, reply: str = REPLY) -> list[dict[str, str]]:
    earlier: list[dict[str, str]] = []
    for i in range(exchanges):
        earlier += [
            {"role": "user", "content": f"What did study {i} measure?"},
            {"role": "assistant", "content": reply},
        ]
    return [{"role": "system", "content": "Be brief."}, *earlier, {"role": "user", "content": WATER_QUESTION}]


def test_a_long_chat_is_answered_never_refused_for_length(app) -> None:
    """Guards what a chat front end sends after ~40 exchanges with 1,500-character
    replies (65 kB): on main a 413 (the 64 kB body cap), and a 400 past 60,000 characters
    of history. Now 40, 400 exchanges and a 200,000-character earlier message are answered."""
    long_message = [{"role": "user", "content": "y" * 200_000}, {"role": "user", "content": WATER_QUESTION}]
    bodies = [
        {"model": "fake", "messages": chat(40)},
        {"model": "fake", "messages": chat(400)},
        {"model": "fake", "messages": long_message},
    ]
    assert 64_000 < len(json.dumps(bodies[0])) < 70_000 and len(json.dumps(bodies[1])) > 600_000
    with serving(app) as url:
        replies = [httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60) for body in bodies]
    for r in replies:
        assert r.status_code == 200, r.text[:300]
        assert "0.18" in r.json()["choices"][0]["message"]["content"]


def test_a_body_past_the_chat_cap_is_a_413_and_other_routes_keep_theirs(app) -> None:
    """The cap that stays against abuse: a chat body over 4 MB is refused before it is
    read whole, and `/api/ask` keeps its 64 kB cap."""
    huge = {"model": "fake", "messages": chat(3_000)}
    assert len(json.dumps(huge)) > ServeSettings.max_chat_body_bytes
    with serving(app) as url:
        refused = httpx.post(f"{url}/v1/chat/completions", json=huge, timeout=60)
        ask = httpx.post(f"{url}/api/ask", json={"question": WATER_QUESTION, "history": chat(50)[1:-1]}, timeout=60)
    assert refused.status_code == 413, refused.text[:300]
    assert refused.json()["error"]["message"] == f"request body over {ServeSettings.max_chat_body_bytes} bytes"
    assert ask.status_code == 413 and ask.json()["error"]["message"] == "request body over 64000 bytes"
