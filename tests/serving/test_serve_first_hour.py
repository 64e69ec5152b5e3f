"""The ask-page items in a real headless Chromium against a real uvicorn and the fake
QA model server: the live reply reads as prose under a clock, evidence buttons that can be
told apart (on a phone too), and the card's small warts."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

import kohaku_rag as kr
from kohaku_rag.samples.render import render_pdf
from kohaku_rag.serving.app import build_app
from kohaku_rag.serving.settings import ServeSettings
from tests.support.asgi_server import serving
from tests.support.browser import chromium, chromium_missing
from tests.support.corpus_docs import DOCS
from tests.support.qa_server import QAServer
from tests.support.serving_corpus import WATER_QUESTION, write_config

pytestmark = pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")


def _screenshot(driver, name: str) -> None:
    """With KOHAKU_SCREENSHOTS=DIR, keep what the browser shows (docs/images/ is made so)."""
    if folder := os.environ.get("KOHAKU_SCREENSHOTS"):
        driver.save_screenshot(str(Path(folder) / name))


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
    # The live box shows the reply as prose under a clock, never its raw JSON.
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
        # Before its first answer the server says it has no figure yet, and how slow a CPU can be.
        assert "no answer with this config here yet" in status, status
        wait.until(lambda d: "0.18" in d.find_element(By.ID, "live-text").text)  # the answer as written
        _screenshot(driver, "ask_page_live_reply.png")
        wait.until(lambda d: "L/kWh" in d.find_element(By.ID, "live-text").text)
        wait.until(ec.visibility_of_element_located((By.ID, "answer")))
        assert not driver.find_element(By.ID, "live-reply").is_displayed()  # the card replaces it
        # The next question is told what to expect from this server's own answers, before its first word.
        driver.find_element(By.ID, "question").clear()
        driver.find_element(By.ID, "question").send_keys("How many watts did the A100 GPU draw?")
        driver.find_element(By.ID, "unit").clear()
        driver.find_element(By.ID, "unit").send_keys("W")
        driver.find_element(By.ID, "ask").click()
        wait.until(lambda d: "answers here take about" in d.find_element(By.ID, "live-status").text)
        status = driver.find_element(By.ID, "live-status").text
        assert re.search(r"answers here take about \d+ s, the median of the last one\)", status), status
        _screenshot(driver, "ask_page_expected_wait.png")
        wait.until(ec.visibility_of_element_located((By.ID, "answer")))
        logs = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert not logs, logs


# Every paragraph opens alike and talks about the asked quantity, so retrieval brings several
# passages of one document from several pages; the value is written "0.180" (not the answer's
# "0.18"), so none states it and every passage of the document is cited.
_FILLER = (
    "Cooling towers reject heat from the chilled water loop by evaporation, and make-up water replaces what "
    "evaporates. Operators track withdrawals with meters on each intake and report them every month. "
) * 3
_SECTIONS = ("Cooling towers", "Metering", "Water usage effectiveness", "Seasonal patterns", "Outlook")


def _paged_water(stated: str) -> str:
    lines = ["# Water\n"]
    for n, title in enumerate(_SECTIONS, 1):
        lines.append(f"## {n} {title}\n")
        for k in range(4):
            value = (
                f" The water usage effectiveness was {stated} liters per kWh in 2023."
                if (n, k) in ((3, 1), (1, 0))
                else ""
            )
            lines.append(
                f"The water usage effectiveness section {n} paragraph {k} discusses liters per kWh. {_FILLER}{value}\n"
            )
    return "\n".join(lines)


def _paged_app(root: Path, qa: QAServer, stated: str):
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    for doc_id, text in DOCS.items():
        if doc_id != "water":
            (corpus / f"{doc_id}.md").write_text(text)
    pdf = render_pdf(_paged_water(stated), columns=1, running_header="Water report", metadata={"title": "Water"})
    (corpus / "water.pdf").write_bytes(pdf)
    (corpus / "metadata.csv").write_text("id,title,url\nwater,Water report,https://example.org/water.pdf\n")
    assert not kr.index(corpus, root / "lake", progress=lambda _m: None).failed
    write_config(root / "lake", "fake", qa.base_url)
    return build_app(ServeSettings(lake=root / "lake", config="fake"))


def _evidence_buttons(driver) -> list[tuple[str, list[str]]]:
    from selenium.webdriver.common.by import By

    groups = driver.find_elements(By.CSS_SELECTOR, "#evidence-pages .page-group")
    return [
        (
            g.find_element(By.CSS_SELECTOR, ".page-label").text,
            [b.text for b in g.find_elements(By.CSS_SELECTOR, ".page-tab")],
        )
        for g in groups
    ]


@pytest.mark.parametrize("phone", [False, True], ids=["desktop", "phone"])
def test_evidence_buttons_are_grouped_by_page_and_tell_passages_apart(tmp_path: Path, qa, phone: bool) -> None:
    # Evidence buttons are grouped by page, in page order, and each says which passage it
    # is (not "p. 2" three times, told apart by a tooltip only).
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    with serving(_paged_app(tmp_path, qa, "0.180")) as url, chromium() as driver:
        if phone:
            driver.set_window_size(390, 844)
        wait = WebDriverWait(driver, 30)
        _ask(driver, url, WATER_QUESTION)
        wait.until(ec.visibility_of_element_located((By.ID, "answer")))
        driver.find_element(By.CSS_SELECTOR, "#chips .chip").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#evidence-pages .page-tab"))
        groups = _evidence_buttons(driver)
        pages = [page for page, _ in groups]
        assert pages == sorted(set(pages)), groups  # one group per page, in page order
        labels = [label for _, buttons in groups for label in buttons]
        assert len(labels) >= 3 and len(set(labels)) == len(labels), groups  # each tells itself apart
        assert not any(re.fullmatch(r"p\. \d+", label) for label in labels), groups
        assert "1 Cooling towers" in labels, groups  # a section heading names a passage
        if phone:
            driver.execute_script("document.getElementById('evidence').scrollIntoView()")
            _screenshot(driver, "ask_page_evidence_phone.png")
            overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, overflow  # nothing sticks out sideways on a phone
            for button in driver.find_elements(By.CSS_SELECTOR, "#evidence-pages .page-tab"):
                assert button.is_displayed() and button.size["height"] >= 18


def test_the_passage_stating_the_value_comes_first(tmp_path: Path, qa) -> None:
    # The document states the answer's value on p. 2 (section 3) and p. 1 (section 1); the
    # retriever ranks p. 2 first: its chip and button come first, the page order after.
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    with serving(_paged_app(tmp_path, qa, "0.18")) as url, chromium() as driver:
        wait = WebDriverWait(driver, 30)
        _ask(driver, url, WATER_QUESTION)
        wait.until(ec.visibility_of_element_located((By.ID, "answer")))
        driver.find_element(By.CSS_SELECTOR, "#chips .chip").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#evidence-pages .page-tab"))
        groups = _evidence_buttons(driver)
        assert all(b for _, b in groups)
        first = driver.find_element(By.CSS_SELECTOR, "#evidence-pages .page-tab")
        assert "active" in first.get_attribute("class") and "states" in first.get_attribute("class")
        assert "0.18" in driver.find_element(By.CSS_SELECTOR, "#evidence-text mark").text


def test_the_card_says_a_follow_up_was_answered_as_typed_and_lists_each_document_once(app, qa) -> None:
    # A failed rewrite is said on the card, the answer line does not repeat its value, and
    # the "wrong" form lists each cited document once.
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    with serving(app) as url, chromium() as driver:
        wait = WebDriverWait(driver, 30)
        _ask(driver, url, WATER_QUESTION, "L/kWh")
        wait.until(ec.visibility_of_element_located((By.ID, "answer")))
        assert driver.find_element(By.ID, "value").text == "0.18"
        assert not driver.find_element(By.ID, "answer-text").text  # only the value and unit: not again
        driver.find_element(By.ID, "fb-wrong").click()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#fb-ref optgroup[label='other documents'] option"))
        values = [o.get_attribute("value") for o in driver.find_elements(By.CSS_SELECTOR, "#fb-ref option")]
        assert values.count("water") == 1 and len(values) == len(set(values)), values
        qa.rewrite_fails = True
        driver.find_element(By.ID, "follow-up").click()
        driver.find_element(By.ID, "question").send_keys("How many watts did the A100 GPU draw?")
        driver.find_element(By.ID, "ask").click()
        wait.until(lambda d: d.find_element(By.ID, "value").text == "400")
        notice = driver.find_element(By.ID, "answered-as")
        assert notice.is_displayed() and notice.text.startswith("answered as typed: the rewrite failed"), notice.text
