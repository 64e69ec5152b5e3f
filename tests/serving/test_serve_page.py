"""The ask page in a real headless Chromium against a real uvicorn: ask, watch the
progress, read the answer card, open a citation (the highlighted page and the marked
paragraph), the expanders and the session history."""

from __future__ import annotations

import re

import pytest

from tests.support.asgi_server import serving
from tests.support.browser import chromium, chromium_missing
from tests.support.serving_corpus import WATER_QUESTION

pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")


def test_ask_page_end_to_end(app) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    with serving(app) as url, chromium() as driver:
        wait = WebDriverWait(driver, 30)
        driver.get(url + "/")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#config option"))
        options = [o.get_attribute("value") for o in driver.find_elements(By.CSS_SELECTOR, "#config option")]
        assert options == ["default", "fake"]
        assert driver.find_element(By.ID, "config").get_attribute("value") == "fake"
        driver.find_element(By.ID, "question").send_keys(WATER_QUESTION)
        driver.find_element(By.ID, "unit").send_keys("L/kWh")
        driver.find_element(By.ID, "ask").click()
        try:
            wait.until(ec.visibility_of_element_located((By.ID, "answer")))
        except Exception:
            raise AssertionError(
                (driver.find_element(By.ID, "error").text, driver.get_log("browser"), driver.page_source[-3000:])
            ) from None
        assert driver.find_element(By.ID, "value").text == "0.18"
        assert driver.find_element(By.ID, "unit-out").text == "L/kWh"
        stages = [li.get_attribute("class") for li in driver.find_elements(By.CSS_SELECTOR, "#progress li")]
        assert stages[-1] == "past" and stages.count("past") >= 3  # retrieving .. done went by
        listed = [li.text for li in driver.find_elements(By.CSS_SELECTOR, "#progress li")]
        assert listed == ["retrieving", "answering", "done"]  # no planner here: no planning stage
        chips = driver.find_elements(By.CSS_SELECTOR, "#chips .chip")
        assert chips and "Water report" in chips[0].text and "p. 1" in chips[0].text
        chips[0].click()
        wait.until(lambda d: (d.find_element(By.ID, "page").get_attribute("src") or "").startswith("blob:"))
        wait.until(lambda d: d.execute_script("return document.getElementById('page').naturalWidth") > 0)
        mark = driver.find_element(By.CSS_SELECTOR, "#evidence-text mark")
        assert "0.18" in mark.text
        assert driver.find_element(By.ID, "evidence-link").get_attribute("href").endswith("water-report.pdf")
        driver.find_element(By.CSS_SELECTOR, "#context summary").click()
        assert driver.find_elements(By.CSS_SELECTOR, "#context-list li")
        driver.find_element(By.CSS_SELECTOR, "#raw summary").click()
        raw = driver.find_element(By.ID, "raw-text").text
        assert "0.18" in raw
        # Where the call's time went, on the attempt's heading line (answer.call_cost).
        assert re.search(r"\[answer #1 · \d+ prompt tokens · \d+ reply tokens · \d+\.\d s\]", raw), raw
        history = driver.find_elements(By.CSS_SELECTOR, "#history li")
        assert len(history) == 1 and WATER_QUESTION in history[0].text
        logs = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not logs, logs
