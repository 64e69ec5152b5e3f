"""Nothing a user wrote is lost or turned against a reviewer: feedback with a lone CR, text
a spreadsheet would run, a flood from one client, and an older lake's Parquet feedback,
through a real uvicorn on 127.0.0.1 and read back with Python's csv module."""

from __future__ import annotations

import csv
import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pyarrow as pa
import pyarrow.parquet as pq

from kohaku_rag.answers.question_files import load_questions
from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.evaluation.submissions import load_submission, write_submission_csv
from kohaku_rag.lake.csv_cells import FORMULA_STARTS, csv_text, read_rows
from kohaku_rag.lake.layout import Lake
from kohaku_rag.serving.app import build_app
from kohaku_rag.serving.feedback import feedback_set_path, question_id, read_feedback
from kohaku_rag.serving.served_answers import all_rows
from tests.support.asgi_server import serving
from tests.support.qa_server import QUESTIONS, QAServer
from tests.support.serving_corpus import WATER_QUESTION, write_config

Q_CARBON, Q_GPU, _ = QUESTIONS


def rows_of(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def write_rows(path: Path, rows: list[dict[str, str]]) -> None:
    path.write_text(csv_text(list(rows[0]), rows), encoding="utf-8")


def ask(url: str, question: str, unit: str | None = None) -> dict:
    r = httpx.post(f"{url}/api/ask", json={"question": question, "unit": unit}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_lone_cr_in_a_comment_does_not_undo_a_review(app, lake: Path) -> None:
    """A lone CR in a comment is quoted in its cell: the row stays whole, the review is kept and
    `kohaku eval --questions feedback` reads the file."""
    path = feedback_set_path(Lake(lake))
    with serving(app) as url:
        gpu = ask(url, Q_GPU, "W")
        wrong = {"answer_id": gpu["answer_id"], "verdict": "wrong", "correct_value": "300", "comment": "see\rtable 2"}
        assert httpx.post(f"{url}/api/feedback", json=wrong).status_code == 200
        assert app.state.feedback_set.flush()  # the file follows the post in the background
        rows = rows_of(path)
        assert len(rows) == 1 and rows[0]["explanation"] == "see\rtable 2"
        rows[0].update(reviewed="yes", answer_value="310")  # the reviewer's decision
        write_rows(path, rows)
        water = ask(url, WATER_QUESTION)
        assert httpx.post(f"{url}/api/feedback", json={"answer_id": water["answer_id"], "verdict": "right"}).is_success
        again = {**wrong, "correct_value": "999", "comment": "again\r"}
        assert httpx.post(f"{url}/api/feedback", json=again).is_success  # new feedback on the reviewed question
    rows = {r["question"]: r for r in rows_of(path)}
    assert len(rows) == 2 and all(None not in r for r in rows.values())
    assert rows[Q_GPU]["reviewed"] == "yes" and rows[Q_GPU]["answer_value"] == "310"
    assert rows[Q_GPU]["explanation"] == "see\rtable 2"
    (reviewed,) = load_questions(path)  # no "appears more than once"
    assert reviewed.gold is not None and reviewed.gold.answer_value == "310"
    path.unlink()  # the file is only an export: the store rebuilds it, the review included
    with serving(app) as url:
        assert httpx.post(f"{url}/api/feedback", json={"answer_id": water["answer_id"], "verdict": "wrong"}).is_success
    assert {r["question"]: r["reviewed"] for r in rows_of(path)}[Q_GPU] == "yes"


class FormulaServer(QAServer):
    """Answers a question behind a formula like the question itself."""

    def _echo(self, body, messages, key):  # noqa: ANN001 - the base class's hook
        return super()._echo(body, messages, key.replace(FORMULAS[0] + " ", ""))


FORMULAS = ['=HYPERLINK("http://evil.example","click")', "+cmd|' /C calc'!A0", "@SUM(1+1)*cmd", "\t=1+1", "-2+3"]


def test_formula_cells_are_neutralised_and_read_back_as_written(app, lake: Path) -> None:
    """Formula cells (`=HYPERLINK(...)`, `+cmd|...`, `@SUM(...)`) are neutralised in a file the
    docs tell reviewers to open in a spreadsheet, and read back as written."""
    path = feedback_set_path(Lake(lake))
    asked = f"{FORMULAS[0]} {WATER_QUESTION}"
    with FormulaServer() as llm, serving(app) as url:
        write_config(lake, "fake", llm.base_url)
        answer = ask(url, asked)
        for text in FORMULAS:
            body = {"answer_id": answer["answer_id"], "verdict": "wrong", "correct_value": text,
                    "correct_unit": text, "comment": text}  # fmt: skip
            assert httpx.post(f"{url}/api/feedback", json=body).status_code == 200
    (row,) = rows_of(path)
    for column, cell in row.items():
        assert not cell.startswith(FORMULA_STARTS), (column, cell)
    assert row["question"].startswith("'=HYPERLINK")
    with path.open(encoding="utf-8", newline="") as handle:
        (back,) = read_rows(handle)
    assert back["question"] == asked and back["explanation"] == "-2+3" and back["answer_value"] == "-2+3"
    assert read_feedback(Lake(lake))[3]["comment"] == "=1+1"  # what the user wrote, kept as text
    # the project's other CSV: a submission keeps a number's sign and neutralises a formula
    out = write_submission_csv(
        lake / "sub.csv",
        [Question(id="q1", question="q", answer_unit="W")],
        {"q1": Answer(answer="=1+1", answer_value="-5", answer_unit="W", ref_id=("gpu",), explanation="@x")},
    )
    (sub,) = rows_of(out)
    assert sub["answer"] == "'=1+1" and sub["answer_value"] == "-5" and sub["explanation"] == "'@x"
    assert load_submission(out)["q1"].answer == "=1+1"


def test_a_feedback_flood_is_capped(settings, lake: Path) -> None:
    """A feedback flood is capped per minute and per answer."""
    app = build_app(dataclasses.replace(settings, feedback_per_minute=6, feedback_per_answer=3))
    with serving(app) as url:
        first, second = ask(url, WATER_QUESTION), ask(url, Q_GPU, "W")
        statuses = []
        for i in range(8):
            answer_id = (first if i < 4 else second)["answer_id"]
            statuses.append(httpx.post(f"{url}/api/feedback", json={"answer_id": answer_id, "verdict": "right"}))
    codes = [r.status_code for r in statuses]
    assert codes == [200, 200, 200, 429, 200, 200, 429, 429], [r.text for r in statuses]
    assert "already has 3 verdicts" in statuses[3].json()["error"]["message"]
    assert "6 posts a minute" in statuses[6].json()["error"]["message"] and statuses[6].headers["Retry-After"]
    assert len(read_feedback(Lake(lake))) == 5


def test_an_older_lakes_parquet_feedback_is_migrated_once(app, lake: Path) -> None:
    """The Parquet tables and the reviewed CSV of a lake written before the store: every row
    moved into it, the answer found by its id, the review kept; the files set aside."""
    when = datetime(2026, 3, 1, 12, tzinfo=UTC)
    answer_id = "b" * 32
    response = {"question": Q_GPU, "answer": "400 W", "value": "400", "unit": "W", "refs": ["gpu"], "config": "fake",
                "answer_id": answer_id, "stored": False, "seconds": 1.0, "cited": []}  # fmt: skip
    old_answers = lake / "served_answers" / "2026-03-01.parquet"
    old_answers.parent.mkdir()
    pq.write_table(pa.Table.from_pylist([{"time": when, "question": Q_GPU, "unit": "W", "config": "fake",
        "config_hash": "h", "index_version": "v", "answer": "400 W", "value": "400", "refs": ["gpu"],
        "is_blank": False, "seconds": 1.0, "stored": False, "via": "api", "response": json.dumps(response)}]),
        old_answers)  # fmt: skip
    verdict = {"time": when, "answer_id": answer_id, "question": Q_GPU, "config": "fake", "served_answer": "400 W",
               "served_value": "400", "served_unit": "W", "served_refs": ["gpu"], "verdict": "wrong",
               "correct_value": "300", "correct_unit": "W", "correct_ref": "gpu", "comment": None}  # fmt: skip
    old_feedback = lake / "served_feedback" / "data.parquet"
    old_feedback.parent.mkdir()
    pq.write_table(pa.Table.from_pylist([verdict]), old_feedback)
    path = feedback_set_path(Lake(lake))
    path.parent.mkdir(parents=True, exist_ok=True)
    reviewed = {"id": question_id(Q_GPU), "question": Q_GPU, "answer": "300 W", "answer_value": "300", "answer_unit": "W",
                "ref_id": "['gpu']", "reviewed": "yes", "answer_id": answer_id}  # fmt: skip
    write_rows(path, [reviewed])
    with serving(app) as url:
        found = httpx.get(f"{url}/api/answers/{answer_id}")
        assert found.status_code == 200 and found.json()["value"] == "400"
        water = ask(url, WATER_QUESTION)
        assert httpx.post(f"{url}/api/feedback", json={"answer_id": water["answer_id"], "verdict": "right"}).is_success
        assert httpx.post(f"{url}/api/feedback", json={"answer_id": answer_id, "verdict": "right"}).is_success
    assert [r["verdict"] for r in read_feedback(Lake(lake))] == ["wrong", "right", "right"]
    assert [r["question"] for r in all_rows(Lake(lake))] == [Q_GPU, WATER_QUESTION]
    rows = {r["question"]: r for r in rows_of(path)}
    assert rows[Q_GPU]["reviewed"] == "yes" and rows[Q_GPU]["answer_value"] == "300"
    assert not old_answers.exists() and old_answers.with_name("2026-03-01.parquet.migrated").exists()
    assert old_feedback.with_name("data.parquet.migrated").exists()
