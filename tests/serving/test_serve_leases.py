"""No answer is left running forever: a `kohaku serve` process killed with SIGKILL while it
answers leaves its jobs to the other processes on the lake (or to its own restart), which
take them over once its lease runs out, or fail them with the reason; a client polling or
streaming the answer on a live process hears which. Real processes on 127.0.0.1, a fake
model (tests/support/qa_server.py) slow enough to kill a process in the middle of an answer."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import httpx

from kohaku_rag.lake.layout import Lake
from kohaku_rag.serving.leases import job_of
from tests.support.qa_server import QUESTIONS, VariantServer
from tests.support.serve_process import kohaku_serve_process
from tests.support.serving_corpus import write_config
from tests.support.sse_text import sse_events

LEASE = 2.0  # seconds: a dead process's jobs are settled within about 1.25 of it
FLAGS = ("--config", "fake", "--job-lease", str(LEASE))


def wait_for(what: str, check: Callable[[], object], timeout: float) -> object:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.1)


def start_answer(url: str, question: str, unit: str, llm: VariantServer) -> str:
    """Ask on `url` (streamed, as the page does), return the answer id once the model has
    the question: the process is then in the middle of answering it."""
    seen = len(llm.requests)
    body = {"question": question, "unit": unit, "stream": True}
    with httpx.stream("POST", f"{url}/api/ask", json=body, timeout=60) as started:
        first = next(line for line in started.iter_lines() if line.startswith("data: "))
        answer_id: str = json.loads(first[6:])["answer_id"]
        wait_for("the model got the question", lambda: len(llm.requests) > seen, 30)
    return answer_id


def kill(proc) -> None:  # noqa: ANN001 - a subprocess.Popen
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)


def test_the_jobs_of_a_killed_process_are_answered_by_another(lake: Path) -> None:
    """Guards kill -9 of one of two processes mid-answer: on main its job stayed `running`
    forever (polls got 202 "answering on another server process" without end, a stream
    waited 600 s, feedback got 404). Now the other process takes it over within about a
    lease: the poll says so, the stream hears it and then the answer, feedback is kept."""
    question, (unit, value, _doc) = next(iter(QUESTIONS.items()))
    with VariantServer() as llm, ExitStack() as stack:
        llm.default_delay = 2.0
        write_config(lake, "fake", llm.base_url)
        doomed_url, doomed = stack.enter_context(kohaku_serve_process(lake, *FLAGS))
        other, _proc = stack.enter_context(kohaku_serve_process(lake, *FLAGS))
        answer_id = start_answer(doomed_url, f"{question} [v1]", unit, llm)
        kill(doomed)
        killed_at = time.monotonic()
        llm.default_delay = 0.0
        with httpx.stream("GET", f"{other}/api/answers/{answer_id}?stream=true", timeout=60) as resumed:
            events = sse_events("".join(f"{line}\n" for line in resumed.iter_lines()))
        answered_in = time.monotonic() - killed_at
        done = httpx.get(f"{other}/api/answers/{answer_id}", timeout=10)
        verdict = httpx.post(f"{other}/api/feedback", json={"answer_id": answer_id, "verdict": "right"}, timeout=30)
    kinds = [kind for kind, _ in events]
    assert kinds[-1] == "done" and events[-1][1]["value"] == value, events
    assert any("taken_over" in data for kind, data in events if kind == "progress"), events
    assert answered_in < 1.25 * LEASE + 15, answered_in
    assert done.status_code == 200 and done.json()["value"] == value, done.text
    assert verdict.status_code == 200, verdict.text
    job = job_of(Lake(lake), answer_id)
    assert job is not None and job["state"] == "done" and job["runs"] == 2


def test_a_job_whose_process_dies_twice_fails_with_its_reason(lake: Path) -> None:
    """Guards a restart after kill -9 (on main the restarted process never touched the
    job: 202 forever). The restart takes the job over, and the poll says so; killed again,
    the job is not passed on a third time (a question whose answering kills its process
    must not kill every process in turn): the next restart fails it, and the poll (503),
    the stream (an error event) and feedback (409) all give the reason."""
    question, (unit, _value, _doc) = next(iter(QUESTIONS.items()))
    with VariantServer() as llm:
        llm.default_delay = 8.0
        write_config(lake, "fake", llm.base_url)
        with kohaku_serve_process(lake, *FLAGS) as (url, proc):
            answer_id = start_answer(url, f"{question} [v2]", unit, llm)
            kill(proc)
        seen = len(llm.requests)
        with kohaku_serve_process(lake, *FLAGS) as (url, proc):
            wait_for("the restart asked the model again", lambda: len(llm.requests) > seen, 1.25 * LEASE + 20)
            running = httpx.get(f"{url}/api/answers/{answer_id}", timeout=10)
            kill(proc)
        with kohaku_serve_process(lake, *FLAGS) as (url, _proc):
            failed = wait_for(
                "the job failed",
                lambda: (r := httpx.get(f"{url}/api/answers/{answer_id}", timeout=10)).status_code != 202 and r,
                1.25 * LEASE + 20,
            )
            streamed = httpx.get(f"{url}/api/answers/{answer_id}?stream=true", timeout=30)
            verdict = httpx.post(f"{url}/api/feedback", json={"answer_id": answer_id, "verdict": "right"}, timeout=30)
    assert running.status_code == 202 and "took it over" in running.json()["taken_over"], running.text
    assert isinstance(failed, httpx.Response) and failed.status_code == 503, failed
    reason = failed.json()["error"]["message"]
    assert "stopped before it finished" in reason and "started 2 times" in reason, reason
    assert sse_events(streamed.text)[-1] == ("error", {"error": {"message": reason, "type": "owner_lost", "code": 503}})
    assert verdict.status_code == 409 and reason in verdict.json()["error"]["message"], verdict.text


def test_a_job_left_running_by_an_older_server_fails_with_its_reason(lake: Path) -> None:
    """Guards a lake upgraded with jobs stuck `running` (main never ended them: 202
    forever after any restart). Such a job kept nothing to ask it again with: the first
    process started on the lake fails it, saying why."""
    from kohaku_rag.serving.served_store import connection

    with connection(Lake(lake)) as db:  # the row as main wrote it: no lease, no spec
        db.execute(
            "INSERT INTO jobs (answer_id, time, state, question, config) VALUES (?, ?, 'running', ?, 'fake')",
            ("a" * 32, "2025-01-01T00:00:00.000+00:00", "What did the stuck job ask?"),
        )
    with VariantServer() as llm:
        write_config(lake, "fake", llm.base_url)
        with kohaku_serve_process(lake, *FLAGS) as (url, _proc):
            failed = wait_for(
                "the job failed",
                lambda: (r := httpx.get(f"{url}/api/answers/{'a' * 32}", timeout=10)).status_code != 202 and r,
                1.25 * LEASE + 20,
            )
    assert isinstance(failed, httpx.Response) and failed.status_code == 503, failed
    assert "older server version" in failed.json()["error"]["message"]
