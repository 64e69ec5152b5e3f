"""The ask page as a daily tool, in a real headless Chromium against a real uvicorn: a reload
mid-answer and a shared link show the same answer, a follow-up is answered as a standalone
question, a phone gets one column, a failure shows on its stage, an empty question says
so, one chip per document, the "Use it from code" panel.

With KOHAKU_SCREENSHOTS=<folder> the tests save the screenshots the docs show."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from kohaku_rag.lake.layout import Lake
from kohaku_rag.serving.served_answers import append_served
from tests.support.asgi_server import serving
from tests.support.browser import chromium, chromium_missing
from tests.support.qa_server import QAServer
from tests.support.serving_corpus import WATER_QUESTION

pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")
SHOTS = os.environ.get("KOHAKU_SCREENSHOTS")


def shot(driver, name: str) -> None:  # noqa: ANN001
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SHOTS) / f"{name}.png"))


def ask_on_page(driver, question: str) -> None:  # noqa: ANN001
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#config option"))
    box = driver.find_element(By.ID, "question")
    box.clear()
    box.send_keys(question)
    driver.find_element(By.ID, "ask").click()


def wait_answer(driver, timeout: float = 30):  # noqa: ANN001, ANN201
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        WebDriverWait(driver, timeout).until(ec.visibility_of_element_located((By.ID, "answer")))
    except Exception:
        raise AssertionError((driver.find_element(By.ID, "error").text, driver.get_log("browser"))) from None
    return driver.find_element(By.ID, "value").text


def answer_id_in_url(driver) -> str:  # noqa: ANN001
    return driver.execute_script("return new URLSearchParams(location.search).get('answer') || ''")


def test_a_reload_mid_answer_and_a_shared_link_show_the_same_answer(app, qa: QAServer) -> None:
    """A reload mid-answer and a shared link show the same question, config and answer."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    qa.default_delay = 1.0
    with serving(app) as url, chromium() as driver:
        driver.get(url + "/")
        ask_on_page(driver, WATER_QUESTION)
        WebDriverWait(driver, 10).until(answer_id_in_url)
        answer_id = answer_id_in_url(driver)
        assert not driver.find_element(By.ID, "answer").is_displayed()  # still being answered
        driver.refresh()
        WebDriverWait(driver, 10).until(lambda d: d.find_element(By.ID, "resuming").is_displayed())
        shot(driver, "ask_page_resuming")
        assert driver.find_element(By.ID, "question").get_attribute("value") == WATER_QUESTION
        assert driver.find_element(By.ID, "config").get_attribute("value") == "fake"
        assert wait_answer(driver) == "0.18"
        assert answer_id_in_url(driver) == answer_id
        assert qa.kinds()["answer"] == 1  # the reload followed the answer; it did not ask again
        history = driver.find_elements(By.CSS_SELECTOR, "#history li")
        assert len(history) == 1 and WATER_QUESTION in history[0].text
        link = driver.current_url
        driver.refresh()  # a reload after the answer: the history is still there (localStorage)
        assert wait_answer(driver) == "0.18"
        assert len(driver.find_elements(By.CSS_SELECTOR, "#history li")) == 1
        with chromium() as other:  # someone else opens the shared link: a fresh browser
            other.get(link)
            assert wait_answer(other) == "0.18"
            assert other.find_element(By.ID, "question").get_attribute("value") == WATER_QUESTION
            assert "stored" not in other.find_element(By.ID, "meta").text
            shot(other, "ask_page_shared_link")
        assert qa.kinds()["answer"] == 1


def test_on_a_phone_the_page_is_one_column_with_a_full_width_page_image(app) -> None:
    """At 375 px the page is one column and the page image takes the full width."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with serving(app) as url, chromium() as driver:
        driver.set_window_size(375, 900)
        driver.get(url + "/")
        width = driver.execute_script("return window.innerWidth")
        ask_on_page(driver, WATER_QUESTION)
        wait_answer(driver)
        driver.find_elements(By.CSS_SELECTOR, "#chips .chip")[0].click()
        WebDriverWait(driver, 30).until(
            lambda d: d.execute_script("return document.getElementById('page').naturalWidth") > 0
        )
        geometry = driver.execute_script(
            """const r = (id) => document.getElementById(id).getBoundingClientRect();
               return {page: r('page'), text: r('evidence-text'), card: r('answer'),
                       scroll: document.documentElement.scrollWidth};"""
        )
        shot(driver, "ask_page_phone")
    card, page, text = geometry["card"], geometry["page"], geometry["text"]
    assert geometry["scroll"] <= width  # nothing runs past the screen
    assert page["width"] >= card["width"] - 40  # the page image as wide as the card
    assert text["top"] >= page["bottom"] - 1  # the paragraph below it: one column
    assert text["right"] <= card["right"] + 1


def test_a_follow_up_on_the_page_says_what_it_answered(app, qa: QAServer) -> None:
    """The page sends a follow-up with its conversation and says what it answered."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with serving(app) as url, chromium() as driver:
        driver.get(url + "/")
        ask_on_page(driver, "How many watts did the A100 GPU draw?")
        assert wait_answer(driver) == "400"
        driver.find_element(By.ID, "follow-up").click()
        assert "How many watts" in driver.find_element(By.ID, "conversation").text
        driver.find_element(By.ID, "question").send_keys("And the water usage effectiveness?")
        driver.find_element(By.ID, "ask").click()
        WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "value").text == "0.18")
        said = driver.find_element(By.ID, "answered-as").text
        shot(driver, "ask_page_follow_up")
    assert said == f"answered as: {WATER_QUESTION}"


def test_errors_empty_questions_chips_and_the_code_panel(app, lake: Path, qa: QAServer) -> None:
    """An empty question says so, a failed stage stops looking busy, one document is one chip,
    and the code panel shows the call."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    # An answer citing three passages of one document on two pages, as served earlier.
    passage = {"doc_id": "water", "title": "Water report", "url": "", "text": "The water usage effectiveness was 0.18.",
               "quote": "The water usage effectiveness was 0.18."}  # fmt: skip
    cited = [
        {**passage, "node_id": "water:sec0:p1", "sentence_id": "water:sec0:p1:s1", "page": 1},
        {**passage, "node_id": "water:sec0:p2", "sentence_id": "water:sec0:p2:s0", "page": 1},
        {**passage, "node_id": "water:sec0:p3", "sentence_id": "water:sec0:p3:s0", "page": 2},
    ]
    answer_id = "a" * 32
    response = {"question": WATER_QUESTION, "answer": "0.18 L/kWh", "value": "0.18", "unit": "L/kWh",
                "refs": ["water"], "explanation": "", "is_blank": False, "cited": cited, "context": [], "raw": [],
                "seconds": 3.5, "queued_seconds": 2.0, "config": "fake", "stored": False, "answer_id": answer_id}  # fmt: skip
    append_served(Lake(lake), {"time": datetime.now(UTC), "question": WATER_QUESTION, "unit": "L/kWh", "config": "fake",
                         "config_hash": "h", "index_version": "v", "answer": "0.18 L/kWh", "value": "0.18",
                         "refs": ["water"], "is_blank": False, "seconds": 3.5, "stored": False, "via": "api",
                         "response": json.dumps(response)})  # fmt: skip
    qa.outage = True
    with serving(app) as url, chromium() as driver:
        driver.get(url + "/")
        ask_on_page(driver, "   ")
        assert "Type a question first" in driver.find_element(By.ID, "error").text
        ask_on_page(driver, "How many tCO2e did training emit?")
        WebDriverWait(driver, 30).until(lambda d: d.find_element(By.ID, "error").is_displayed())
        failed = driver.find_elements(By.CSS_SELECTOR, "#progress li.error")
        assert len(failed) == 1 and "failed" in failed[0].text
        assert not driver.find_elements(By.CSS_SELECTOR, "#progress li.now")
        driver.get(f"{url}/?answer={answer_id}")
        wait_answer(driver)
        chips = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "#chips .chip")]
        assert chips == ["[1] Water report · pp. 1, 2"]
        assert "2.0 s of it in the queue" in driver.find_element(By.ID, "meta").text
        driver.find_element(By.CSS_SELECTOR, "#chips .chip").click()
        tabs = [t.text for t in driver.find_elements(By.CSS_SELECTOR, "#evidence-pages .page-tab")]
        pages = [t.text for t in driver.find_elements(By.CSS_SELECTOR, "#evidence-pages .page-label")]
        # grouped by page; passages of one text are told apart by number
        assert pages == ["p. 1", "p. 2"]
        assert tabs == [f"The water usage effectiveness was… ({n})" for n in (1, 2, 3)]
        driver.find_element(By.ID, "code-link").click()
        curl = driver.find_element(By.ID, "code-curl").text
        python = driver.find_element(By.ID, "code-python").text
        webui = driver.find_element(By.ID, "code-webui").text
        shot(driver, "ask_page_code_panel")
    assert f"{url}/api/ask" in curl and f"{url}/v1/chat/completions" in curl and '"fake"' in curl
    assert f'base_url="{url}/v1"' in python and 'model="fake"' in python
    assert f"{url}/v1" in webui and "default, fake" in webui
