"""The ask page never shows a reply's copied rule as an answer: a model that writes "the answer
in L/kWh" gets an abstention card that says why, and a value the cited passage does not state
is flagged in plain words (a real headless Chromium, a fake model server)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from kohaku_rag.serving.app import build_app
from kohaku_rag.serving.settings import ServeSettings
from tests.support.asgi_server import serving
from tests.support.browser import chromium, chromium_missing
from tests.support.qa_server import QUESTIONS, QAServer, response_schema
from tests.support.serving_corpus import WATER_QUESTION, write_config

GPU_QUESTION = "How many watts did the A100 GPU draw?"
SHOTS = Path(os.environ.get("KOHAKU_SCREENSHOTS", "")) if os.environ.get("KOHAKU_SCREENSHOTS") else None


class CopyingServer(QAServer):
    """Copies its value rule for the water question; for the GPU question states a number the
    passages do not hold. Citations name the gold document, as the well-behaved server's do."""

    def _echo(self, body, messages, key):  # noqa: ANN001 - the base class's hook
        schema = response_schema(body)
        if "ref_id" not in schema["properties"]:
            return super()._echo(body, messages, key)
        for question, (unit, _value, doc) in QUESTIONS.items():
            if f"Question: {question}" in key:
                value = f"the answer in {unit}" if question == WATER_QUESTION else "350"
                return json.dumps({"explanation": "As the passage says.", "answer": f"{value}",
                                   "answer_value": value, "ref_id": [doc], "is_blank": False})  # fmt: skip
        return super()._echo(body, messages, key)


@pytest.fixture()
def copying_app(lake: Path):
    with CopyingServer() as server:
        write_config(lake, "copying", server.base_url)
        yield build_app(ServeSettings(lake=lake, config="copying"))


def test_the_api_says_why_there_is_no_answer_and_when_a_value_is_not_stated(copying_app) -> None:
    """Before: the card showed "the answer in L/kWh L/kWh" as the answer, with its citation."""
    with TestClient(copying_app) as client:
        copied = client.post("/api/ask", json={"question": WATER_QUESTION, "unit": "L/kWh"}).json()
        assert copied["is_blank"] is True and copied["support"] is None
        assert copied["abstained_because"] == "the reply's value 'the answer in L/kWh' is not a number in L/kWh"
        unstated = client.post("/api/ask", json={"question": GPU_QUESTION, "unit": "W"}).json()
    assert unstated["value"] == "350" and unstated["abstained_because"] is None
    assert unstated["support"]["stated"] is False and "do not state this value" in unstated["support"]["note"]


@pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")
def test_the_card_shows_an_abstention_with_its_reason_and_flags_an_unstated_value(copying_app) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    def ask(driver, question: str, unit: str) -> None:  # noqa: ANN001 - a selenium driver
        driver.find_element(By.ID, "question").clear()
        driver.find_element(By.ID, "question").send_keys(question)
        driver.find_element(By.ID, "unit").clear()
        driver.find_element(By.ID, "unit").send_keys(unit)
        driver.find_element(By.ID, "ask").click()

    with serving(copying_app) as url, chromium() as driver:
        wait = WebDriverWait(driver, 30)
        driver.set_window_size(1100, 900)
        driver.get(url + "/")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#config option"))
        ask(driver, WATER_QUESTION, "L/kWh")
        wait.until(ec.visibility_of_element_located((By.ID, "why-blank")))
        assert driver.find_element(By.ID, "value").text == "No answer in the documents"
        assert "the answer in L/kWh" not in driver.find_element(By.ID, "value").text
        why = driver.find_element(By.ID, "why-blank").text
        assert why == "Not shown as an answer: the reply's value 'the answer in L/kWh' is not a number in L/kWh."
        if SHOTS:
            driver.save_screenshot(str(SHOTS / "ask_page_not_an_answer.png"))

        ask(driver, GPU_QUESTION, "W")
        wait.until(lambda d: d.find_element(By.ID, "value").text == "350")
        wait.until(ec.visibility_of_element_located((By.ID, "support-note")))
        note = driver.find_element(By.ID, "support-note").text
        assert note.startswith("The cited passages do not state this value")
        assert not driver.find_element(By.ID, "why-blank").is_displayed()
        if SHOTS:
            driver.save_screenshot(str(SHOTS / "ask_page_unstated_value.png"))
