"""Feedback that becomes an evaluation set: verdicts on served answers (POST /api/feedback
through a real uvicorn), the `feedback` question file a reviewer signs off row by row, the
`served_feedback` Dagster asset and its sensor, and the ask page's right / wrong buttons in a
real headless Chromium."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import httpx
import pytest
from dagster import AssetKey, DagsterInstance, SensorResult, build_sensor_context, materialize

from kohaku_assets.assets.serving import served_feedback
from kohaku_assets.resources import KohakuSettings
from kohaku_assets.runner import resources_for
from kohaku_assets.sensors import feedback_backfill_sensor, served_feedback_sensor
from kohaku_rag.answers.question_files import load_questions
from kohaku_rag.lake.layout import Lake
from kohaku_rag.serving.feedback import feedback_set_path
from tests.support.asgi_server import serving
from tests.support.browser import chromium, chromium_missing
from tests.support.qa_server import QUESTIONS
from tests.support.serving_corpus import WATER_QUESTION

Q_CARBON, Q_GPU, _ = QUESTIONS


def rows_of(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def set_reviewed(path: Path, question: str) -> None:
    rows = rows_of(path)
    for row in rows:
        if row["question"] == question:
            row["reviewed"] = "yes"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def test_verdicts_become_a_question_file_that_counts_reviewed_rows(app, lake: Path) -> None:
    """Verdicts on answers become a question file, which counts the reviewed rows."""
    with serving(app) as url:
        water = httpx.post(f"{url}/api/ask", json={"question": WATER_QUESTION}, timeout=30).json()
        gpu = httpx.post(f"{url}/api/ask", json={"question": Q_GPU, "unit": "W"}, timeout=30).json()
        right = httpx.post(f"{url}/api/feedback", json={"answer_id": water["answer_id"], "verdict": "right"})
        wrong = {"answer_id": gpu["answer_id"], "verdict": "wrong", "correct_value": "300", "correct_unit": "W",
                 "correct_ref": "gpu", "comment": "the table says 300 W"}  # fmt: skip
        corrected = httpx.post(f"{url}/api/feedback", json=wrong)
        refused = [
            httpx.post(f"{url}/api/feedback", json={"answer_id": "f" * 32, "verdict": "right"}),
            httpx.post(f"{url}/api/feedback", json={"answer_id": gpu["answer_id"], "verdict": "maybe"}),
            httpx.post(f"{url}/api/feedback", json={**wrong, "correct_ref": "nosuchdoc"}),
            httpx.post(f"{url}/api/feedback", json={**wrong, "comment": "x" * 5000}),
        ]
    assert right.status_code == 200 and corrected.status_code == 200, (right.text, corrected.text)
    assert corrected.json()["question_set"] == "qa/question_sets/feedback.csv"
    assert [r.status_code for r in refused] == [404, 400, 400, 400]
    assert "nosuchdoc" in refused[2].json()["error"]["message"]
    path = feedback_set_path(Lake(lake))
    rows = {r["question"]: r for r in rows_of(path)}
    assert rows[WATER_QUESTION]["answer_value"] == "0.18" and rows[WATER_QUESTION]["ref_id"] == "['water']"
    assert rows[Q_GPU]["answer_value"] == "300" and rows[Q_GPU]["answer_unit"] == "W"
    assert rows[Q_GPU]["ref_id"] == "['gpu']" and rows[Q_GPU]["explanation"] == "the table says 300 W"
    assert rows[Q_GPU]["served_value"] == "400" and {r["reviewed"] for r in rows.values()} == {"no"}
    assert load_questions(path) == []  # nothing counts before a reviewer signs it off
    set_reviewed(path, Q_GPU)
    (reviewed,) = load_questions(path)
    assert reviewed.question == Q_GPU and reviewed.gold is not None and reviewed.gold.answer_value == "300"
    # A later verdict does not overwrite the reviewer's row; it still updates unreviewed ones.
    with serving(app) as url:
        httpx.post(f"{url}/api/feedback", json={**wrong, "correct_value": "999"})
        httpx.post(f"{url}/api/feedback", json={"answer_id": water["answer_id"], "verdict": "wrong"})
    rows = {r["question"]: r for r in rows_of(path)}
    assert rows[Q_GPU]["answer_value"] == "300" and rows[Q_GPU]["reviewed"] == "yes"
    assert rows[WATER_QUESTION]["verdict"] == "wrong" and rows[WATER_QUESTION]["answer_value"] == ""


def test_the_served_feedback_asset_and_its_sensor(app, lake: Path) -> None:
    resources = resources_for(KohakuSettings(lake_root=str(lake)))
    instance = DagsterInstance.ephemeral()

    def tick(cursor: str | None) -> SensorResult | object:
        return served_feedback_sensor(build_sensor_context(instance=instance, resources=resources, cursor=cursor))

    assert "no new feedback" in str(tick(None).skip_message)
    with serving(app) as url:
        answer = httpx.post(f"{url}/api/ask", json={"question": WATER_QUESTION}, timeout=30).json()
        httpx.post(f"{url}/api/feedback", json={"answer_id": answer["answer_id"], "verdict": "right"})
    first = tick(None)
    assert isinstance(first, SensorResult) and not first.run_requests
    (event,) = first.asset_events
    assert event.asset_key == AssetKey("served_feedback") and event.metadata["waiting_for_review"].value == 1
    assert "no new feedback" in str(tick(first.cursor).skip_message)
    set_reviewed(feedback_set_path(Lake(lake)), WATER_QUESTION)
    result = materialize([served_feedback], instance=instance, resources=resources)
    (mat,) = result.asset_materializations_for_node("served_feedback")
    assert mat.metadata["right"].value == 1 and mat.metadata["reviewed"].value == 1
    assert mat.metadata["waiting_for_review"].value == 0


@pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")
def test_the_page_sends_a_correction_to_the_question_file(app, lake: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    with serving(app) as url, chromium() as driver:
        wait = WebDriverWait(driver, 30)
        driver.get(url + "/")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#config option"))
        driver.find_element(By.ID, "question").send_keys(Q_CARBON)
        driver.find_element(By.ID, "ask").click()
        wait.until(ec.visibility_of_element_located((By.ID, "answer")))
        driver.find_element(By.ID, "fb-wrong").click()
        driver.find_element(By.ID, "fb-value").send_keys("4.4")
        driver.find_element(By.ID, "fb-unit").send_keys("tCO2e")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#fb-ref option")) > 2)  # cited + every document
        Select(driver.find_element(By.ID, "fb-ref")).select_by_value("carbon")
        driver.find_element(By.ID, "fb-comment").send_keys("the paper's table 2 says 4.4")
        if os.environ.get("KOHAKU_SCREENSHOTS"):
            driver.save_screenshot(str(Path(os.environ["KOHAKU_SCREENSHOTS"]) / "ask_page_feedback.png"))
        driver.find_element(By.ID, "fb-send").click()
        wait.until(lambda d: d.find_element(By.ID, "feedback-status").is_displayed())
        status = driver.find_element(By.ID, "feedback-status").text
    assert "kept for review" in status
    (row,) = rows_of(feedback_set_path(Lake(lake)))
    assert row["question"] == Q_CARBON and row["answer_value"] == "4.4" and row["answer_unit"] == "tCO2e"
    assert row["ref_id"] == "['carbon']" and row["verdict"] == "wrong" and row["reviewed"] == "no"


def test_the_backfill_sensor_runs_the_feedback_configs_when_reviews_change(app, lake: Path) -> None:
    resources = resources_for(KohakuSettings(lake_root=str(lake)))
    instance = DagsterInstance.ephemeral()

    def tick(cursor: str | None) -> SensorResult | object:
        return feedback_backfill_sensor(build_sensor_context(instance=instance, resources=resources, cursor=cursor))

    data = json.loads((lake / "configs" / "fake.json").read_text())
    (lake / "configs" / "fb.json").write_text(json.dumps({**data, "questions": "feedback"}))
    with serving(app) as url:
        answer = httpx.post(f"{url}/api/ask", json={"question": WATER_QUESTION}, timeout=30).json()
        httpx.post(f"{url}/api/feedback", json={"answer_id": answer["answer_id"], "verdict": "right"})
    # Turned on: what is there is recorded, not run (never everything at once).
    on = tick(None)
    assert isinstance(on, SensorResult) and not on.run_requests and "turned on" in str(on.skip_reason)
    assert "no newly reviewed" in str(tick(on.cursor).skip_message)  # a verdict waiting for review: nothing yet
    set_reviewed(feedback_set_path(Lake(lake)), WATER_QUESTION)
    first = tick(on.cursor)
    assert isinstance(first, SensorResult)
    assert [(r.partition_key, r.job_name) for r in first.run_requests] == [("fb", "answer_config")]
    assert "no newly reviewed" in str(tick(first.cursor).skip_message)


def test_the_backfill_sensor_turned_on_runs_nothing_that_did_not_change(app, lake: Path) -> None:
    # Turned on over a lake with reviewed feedback, the backfill sensor runs nothing that did
    # not change (no re-failures of broken configs, no no-ops of answered ones).
    resources = resources_for(KohakuSettings(lake_root=str(lake)))
    instance = DagsterInstance.ephemeral()
    data = json.loads((lake / "configs" / "fake.json").read_text())
    (lake / "configs" / "fb.json").write_text(json.dumps({**data, "questions": "feedback"}))
    with serving(app) as url:
        answer = httpx.post(f"{url}/api/ask", json={"question": WATER_QUESTION}, timeout=30).json()
        httpx.post(f"{url}/api/feedback", json={"answer_id": answer["answer_id"], "verdict": "right"})
    set_reviewed(feedback_set_path(Lake(lake)), WATER_QUESTION)
    on = feedback_backfill_sensor(build_sensor_context(instance=instance, resources=resources, cursor=None))
    assert isinstance(on, SensorResult) and not on.run_requests
