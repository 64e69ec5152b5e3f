"""The JSON API items over real HTTP to a real uvicorn: no WattBot spelling in a
reply's unit, and a follow-up answered as typed says so."""

from __future__ import annotations

import httpx

from tests.support.asgi_server import serving
from tests.support.serving_corpus import WATER_QUESTION

FOLLOW_UP = "And the water usage effectiveness?"


def test_a_reply_without_an_asked_unit_has_a_null_unit(app) -> None:
    # With no unit asked, the reply's unit is null, not the WattBot CSV's "is_blank".
    with serving(app) as url:
        plain = httpx.post(url + "/api/ask", json={"question": WATER_QUESTION}, timeout=60).json()
        with_unit = httpx.post(url + "/api/ask", json={"question": WATER_QUESTION, "unit": "L/kWh"}, timeout=60).json()
        stored = httpx.post(url + "/api/ask", json={"question": WATER_QUESTION}, timeout=60).json()
    assert plain["value"] == "0.18" and plain["unit"] is None
    assert with_unit["unit"] == "L/kWh"
    assert stored["stored"] and stored["unit"] is None


def test_a_follow_up_whose_rewrite_failed_says_it_was_answered_as_typed(app, qa) -> None:
    # A follow-up whose rewrite failed is answered as typed, and the reply says so.
    history = [
        {"role": "user", "content": "How many watts did the A100 GPU draw?"},
        {"role": "assistant", "content": "400 W"},
    ]
    with serving(app) as url:
        qa.rewrite_fails = True
        failed = httpx.post(url + "/api/ask", json={"question": WATER_QUESTION, "history": history}, timeout=60).json()
        qa.rewrite_fails = False
        good = httpx.post(url + "/api/ask", json={"question": FOLLOW_UP, "history": history}, timeout=60).json()
    assert failed["value"] == "0.18" and failed["standalone_question"] == WATER_QUESTION
    assert "no rewritten question" in failed["rewrite_failed"], failed
    assert good["standalone_question"] == WATER_QUESTION and "rewrite_failed" not in good
