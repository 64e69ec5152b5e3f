"""Issue 43's ask-page items in a real headless Chromium against a real uvicorn and the fake
QA model server: the live reply reads as prose under a clock, evidence buttons that can be
told apart (on a phone too), and the card's small warts."""

from __future__ import annotations

import re

import pytest
from asgi_server import serving
from browser import chromium, chromium_missing
from serving_corpus import WATER_QUESTION

pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")


def _ask(driver, url: str, question: str, unit: str = "") -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url + "/")
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#config option"))
    driver.find_element(By.ID, "question").send_keys(question)
    if unit:
        driver.find_element(By.ID, "unit").send_keys(unit)
    driver.find_element(By.ID, "ask").click()


def test_the_live_reply_reads_as_prose_under_a_clock(app, qa) -> None:
    # Failed on main: the live box showed the raw JSON ({ "explanation": ...) and no clock.
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    qa.stream_pause = 0.3  # ~7 s of writing: long enough to read it partway
    with serving(app) as url, chromium() as driver:
        wait = WebDriverWait(driver, 60, poll_frequency=0.1)
        _ask(driver, url, WATER_QUESTION, "L/kWh")
        # The explanation's words ("seed 0 temperature 0.3") appear while the model writes.
        wait.until(lambda d: "seed" in d.find_element(By.ID, "live-text").text)
        assert not driver.find_element(By.ID, "answer").is_displayed()
        shown = driver.find_element(By.ID, "live-text").text
        assert "{" not in shown and '"' not in shown and "explanation" not in shown, shown
        status = driver.find_element(By.ID, "live-status").text
        assert re.search(r"at it for \d+ s", status), status
        wait.until(lambda d: "L/kWh" in d.find_element(By.ID, "live-text").text)  # the answer as written
        wait.until(ec.visibility_of_element_located((By.ID, "answer")))
        assert not driver.find_element(By.ID, "live-reply").is_displayed()  # the card replaces it
        logs = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not logs, logs
