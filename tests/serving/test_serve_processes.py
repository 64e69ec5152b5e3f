"""Several `kohaku serve` processes on one lake (no sticky sessions): concurrent asks and
feedback to each, every answer id usable on every process, and not one row lost. Real
processes on 127.0.0.1, a fake model (tests/support/qa_server.py)."""

from __future__ import annotations

import csv
import json
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import httpx

from kohaku_rag.lake.layout import Lake
from kohaku_rag.serving.feedback import feedback_set_path, read_feedback
from kohaku_rag.serving.served_answers import all_rows
from tests.support.qa_server import QUESTIONS, VariantServer
from tests.support.serve_process import kohaku_serve
from tests.support.serving_corpus import write_config


def test_two_processes_on_one_lake_lose_no_row(lake: Path) -> None:
    """Two serve processes on one lake lose no row: every answer and verdict either one takes
    is kept."""
    facts = list(QUESTIONS.items())
    asks_each, feedback_each = 20, 40
    with VariantServer() as llm, ExitStack() as stack:
        write_config(lake, "fake", llm.base_url, max_concurrent=4)
        flags = ("--config", "fake", "--feedback-per-minute", "1000")
        urls = [stack.enter_context(kohaku_serve(lake, *flags)) for _ in range(2)]

        def ask(i: int) -> dict:
            question, (unit, _value, _doc) = facts[i % 3]
            body = {"question": f"{question} [v{i}]", "unit": unit}
            r = httpx.post(f"{urls[i % 2]}/api/ask", json=body, timeout=60)
            assert r.status_code == 200, r.text
            return r.json()

        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(ask, range(2 * asks_each)))

        def feedback(i: int) -> httpx.Response:
            answer = answers[i % len(answers)]
            url = urls[(i + 1) % 2]  # half the time the other process than the one that answered
            verdict = {
                "answer_id": answer["answer_id"],
                "verdict": "wrong",
                "correct_value": str(i),
                "comment": f"#{i}",
            }
            return httpx.post(f"{url}/api/feedback", json=verdict, timeout=60)

        with ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(feedback, range(2 * feedback_each)))
        assert [r.status_code for r in replies] == [200] * len(replies), [r.text for r in replies if r.is_error]
        # an answer given by one process is fetched from the other
        other = httpx.get(f"{urls[1]}/api/answers/{answers[0]['answer_id']}", timeout=10)
        assert other.status_code == 200 and other.json()["answer_id"] == answers[0]["answer_id"]
    lake_ = Lake(lake)
    assert len(all_rows(lake_)) == 2 * asks_each
    kept = read_feedback(lake_)
    assert sorted(int(r["correct_value"]) for r in kept) == list(range(2 * feedback_each))
    with feedback_set_path(lake_).open(encoding="utf-8", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 2 * asks_each  # one row per question, each with feedback


def test_an_answer_started_on_one_process_is_resumed_on_another(lake: Path) -> None:
    """An answer started on one process is found and resumed on another (no 404)."""
    question, (unit, value, _doc) = next(iter(QUESTIONS.items()))
    with VariantServer() as llm, ExitStack() as stack:
        llm.default_delay = 2.0
        write_config(lake, "fake", llm.base_url)
        first, second = (stack.enter_context(kohaku_serve(lake, "--config", "fake")) for _ in range(2))
        body = {"question": f"{question} [v1]", "unit": unit, "stream": True}
        with httpx.stream("POST", f"{first}/api/ask", json=body, timeout=60) as started:
            answer_id = json.loads(next(line for line in started.iter_lines() if line.startswith("data: "))[6:])[
                "answer_id"
            ]
            running = httpx.get(f"{second}/api/answers/{answer_id}", timeout=10)  # the client moved on
        assert running.status_code == 202 and running.json()["status"] == "running", running.text
        with httpx.stream("GET", f"{second}/api/answers/{answer_id}?stream=true", timeout=60) as resumed:
            events = [line for line in resumed.iter_lines() if line.startswith("event: ")]
        assert events[-1] == "event: done", events
        done = httpx.get(f"{second}/api/answers/{answer_id}", timeout=10)
        assert done.status_code == 200 and done.json()["value"] == value
        verdict = {"answer_id": answer_id, "verdict": "right"}
        assert httpx.post(f"{second}/api/feedback", json=verdict, timeout=30).status_code == 200
