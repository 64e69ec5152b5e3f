"""A feedback post does not wait for the `feedback` question set's rebuild (which reads
every verdict: at 10,000 of them, seconds per post). The verdict is committed to the store
before the reply; the file follows in the background and holds every verdict once the
server stops. Real HTTP to a real uvicorn, a real cross-process file lock."""

from __future__ import annotations

import csv
import fcntl
import time
from pathlib import Path

import httpx

from kohaku_rag.lake.layout import Lake
from kohaku_rag.serving.feedback import feedback_set_path, read_feedback
from kohaku_rag.serving.served_store import STORE_DIR
from tests.support.asgi_server import serving
from tests.support.qa_server import QUESTIONS
from tests.support.serving_corpus import WATER_QUESTION

Q_CARBON, Q_GPU, _ = QUESTIONS


def questions_in(path: Path) -> set[str]:
    if not path.exists():
        return set()
    with path.open(encoding="utf-8", newline="") as handle:
        return {row["question"] for row in csv.DictReader(handle)}


def test_a_post_is_kept_while_the_question_set_is_being_rebuilt(app, lake: Path) -> None:
    """Guards posts waiting on the rebuild: on main each post rebuilt the whole file under
    the lake's rebuild lock, so while another rebuild held it (another process's, at 10,000
    verdicts for seconds) every post waited. Here the lock is held throughout: the posts
    still answer at once, their verdicts are in the store, and the file catches up once the
    lock is free."""
    path = feedback_set_path(Lake(lake))
    lock = lake / STORE_DIR / "feedback_set.lock"
    with serving(app) as url:
        answers = [
            httpx.post(f"{url}/api/ask", json={"question": q}, timeout=30).json() for q in (WATER_QUESTION, Q_GPU)
        ]
        lock.parent.mkdir(parents=True, exist_ok=True)
        with lock.open("a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)  # a rebuild in progress elsewhere
            started = time.monotonic()
            replies = [
                httpx.post(f"{url}/api/feedback", json={"answer_id": a["answer_id"], "verdict": "right"}, timeout=5)
                for a in answers
            ]
            seconds = time.monotonic() - started
            kept = len(read_feedback(Lake(lake)))
            fcntl.flock(held, fcntl.LOCK_UN)
        deadline = time.monotonic() + 30
        while questions_in(path) != {WATER_QUESTION, Q_GPU}:  # the file follows once the lock is free
            assert time.monotonic() < deadline, questions_in(path)
            time.sleep(0.05)
        late = httpx.post(f"{url}/api/ask", json={"question": Q_CARBON, "unit": "tCO2e"}, timeout=30).json()
        assert httpx.post(f"{url}/api/feedback", json={"answer_id": late["answer_id"], "verdict": "right"}).is_success
    assert [r.status_code for r in replies] == [200, 200], [r.text for r in replies]
    assert replies[0].json()["question_set"] == "qa/question_sets/feedback.csv"
    assert seconds < 4 and kept == 2, seconds
    assert questions_in(path) == {WATER_QUESTION, Q_GPU, Q_CARBON}  # the server stopped: every verdict is in
