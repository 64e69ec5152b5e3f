"""The bundled model's reply reaches the asker while it is written: `reply` progress events
on the JSON API's stream, and the ask page's live reply box (a real headless Chromium), with
the real llama.cpp model on a short context."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tests.support.asgi_server import serving
from tests.support.browser import chromium, chromium_missing
from tests.support.serving_corpus import WATER_QUESTION, write_bundled_config
from tests.support.sse_text import sse_events

pytest.importorskip("llama_cpp")

from kohaku_rag.serving.app import build_app  # noqa: E402
from kohaku_rag.serving.settings import ServeSettings  # noqa: E402


@pytest.fixture()
def bundled_app(lake: Path):
    """A config answering with the bundled model on an 800-character context, no planner, no
    retry: one ~20-second answer on 2 cores."""
    write_bundled_config(lake)
    return build_app(ServeSettings(lake=lake, config="bundled"))


def test_the_stream_carries_the_reply_as_the_model_writes_it(bundled_app) -> None:
    with TestClient(bundled_app) as client:
        res = client.post("/api/ask", json={"question": WATER_QUESTION, "unit": "L/kWh", "stream": True})
    assert res.status_code == 200
    events = sse_events(res.text)
    stages = [p["stage"] for kind, p in events if kind == "progress" and "stage" in p]
    pieces = [(i, p["reply"]) for i, (kind, p) in enumerate(events) if kind == "progress" and "reply" in p]
    assert len(pieces) > 5, events[:10]  # token by token, not one block
    answering = next(i for i, (kind, p) in enumerate(events) if p.get("stage") == "answering")
    assert all(i > answering for i, _ in pieces)  # no planner here: the answer's reply only
    done = events[-1]
    assert done[0] == "done" and stages[-1] == "done"
    assert stages[0] == "retrieving" and "planning" not in stages  # no planner, no planning stage
    streamed = json.loads("".join(text for _, text in pieces))
    (attempt,) = done[1]["raw"]  # what the answerer parsed is what was streamed
    assert streamed == json.loads(attempt["reply"])

    # The same question again is a stored answer: no model, no reply events.
    with TestClient(bundled_app) as client:
        again = client.post("/api/ask", json={"question": WATER_QUESTION, "unit": "L/kWh", "stream": True})
    assert not [p for kind, p in sse_events(again.text) if "reply" in p]


@pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")
def test_the_ask_page_shows_the_reply_while_it_is_written(bundled_app) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    with serving(bundled_app) as url, chromium() as driver:
        wait = WebDriverWait(driver, 180, poll_frequency=0.2)
        driver.get(url + "/")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#config option"))
        assert driver.find_element(By.ID, "config").get_attribute("value") == "bundled"
        driver.find_element(By.ID, "question").send_keys(WATER_QUESTION)
        driver.find_element(By.ID, "ask").click()
        # Partway: the live box shows the reply's prose (not its JSON) while the card is not there yet.
        wait.until(lambda d: len(d.find_element(By.ID, "live-text").text) > 12)
        assert not driver.find_element(By.ID, "answer").is_displayed()
        partial = driver.find_element(By.ID, "live-text").text
        assert not partial.startswith("{"), partial
        wait.until(ec.visibility_of_element_located((By.ID, "answer")))
        assert not driver.find_element(By.ID, "live-reply").is_displayed()  # the card replaces it
        # The progress list names what ran: no planner in this config, so no "planning" stage.
        listed = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#progress li")]
        assert listed == ["retrieving", "answering", "done"], listed
        driver.find_element(By.CSS_SELECTOR, "#raw summary").click()
        raw = driver.find_element(By.ID, "raw-text").text

        def compact(text: str) -> str:
            return "".join(text.split())

        assert compact(partial)[:12] in compact(raw)  # what was shown live is the reply kept
        logs = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not logs, logs
