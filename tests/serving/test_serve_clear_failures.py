"""Clear failures while serving: an index that can't be read is named by /healthz and by a
503 from search and ask (not a 500, not "run `kohaku index` first" when there is an index);
a long chat is answered (its last turns are used, its characters capped)."""

from __future__ import annotations

import httpx

from kohaku_rag.lake.layout import Lake
from tests.support.asgi_server import serving
from tests.support.serving_corpus import WATER_QUESTION


def test_an_unreadable_manifest_is_a_503_with_the_reason(app, lake) -> None:
    """An unreadable manifest is a 503 with the reason from search and ask alike, not a 500 or
    a claim that there is no index."""
    with serving(app) as url:
        assert httpx.get(f"{url}/healthz").json()["status"] == "ok"
        Lake(lake).manifest_path.write_text('{"format_version": ')
        health = httpx.get(f"{url}/healthz")
        search = httpx.post(f"{url}/api/search", json={"question": WATER_QUESTION})
        ask = httpx.post(f"{url}/api/ask", json={"question": WATER_QUESTION}, timeout=30)
    assert health.status_code == 503 and "manifest.json" in health.json()["error"]
    for r in (search, ask):
        assert r.status_code == 503, r.text
        message = r.json()["error"]["message"]
        assert "manifest.json" in message and "unreadable" in message and "first" not in message
        assert str(lake) not in r.text and "Traceback" not in r.text


def test_a_long_chat_is_answered_from_its_last_turns(app) -> None:
    """Fails on main: a /v1 chat of 51 messages was refused (400): a chat front end stopped
    answering after ~20 exchanges."""
    earlier = []
    for i in range(25):
        earlier += [{"role": "user", "content": f"question {i}?"}, {"role": "assistant", "content": f"answer {i}."}]
    messages = [{"role": "system", "content": "Be brief."}, *earlier, {"role": "user", "content": WATER_QUESTION}]
    assert len(messages) == 52
    with serving(app) as url:
        body = {"model": "fake", "messages": messages}
        r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    assert "0.18" in r.json()["choices"][0]["message"]["content"]
