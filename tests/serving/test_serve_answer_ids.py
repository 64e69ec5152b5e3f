"""Answers with ids, through a real uvicorn on 127.0.0.1 and a fake model server: an answer
found again by its id (done, or followed live after the first client left), clients that
hang up giving their queue places back, only delivered answers counted as served, and the
time shown counting the wait in the queue."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from pathlib import Path

import httpx

from kohaku_rag.lake.layout import Lake
from kohaku_rag.serving.app import build_app
from kohaku_rag.serving.served_answers import all_rows
from tests.support.asgi_server import serving
from tests.support.qa_server import QUESTIONS, QAServer
from tests.support.serving_corpus import WATER_QUESTION, write_config
from tests.support.waiting import wait_until

Q_CARBON, Q_GPU, Q_WATER = QUESTIONS


def served_questions(lake: Path) -> list[str]:
    return [r["question"] for r in all_rows(Lake(lake))]


def events_of(lines: list[str]) -> list[tuple[str, dict]]:
    out, name = [], "message"
    for line in lines:
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            out.append((name, json.loads(line[6:])))
            name = "message"
    return out


def test_an_answer_is_found_again_by_its_id(app, lake: Path) -> None:
    """Every answer has an id, and /api/answers/{id} finds it again."""
    with serving(app) as url:
        first = httpx.post(f"{url}/api/ask", json={"question": WATER_QUESTION}, timeout=30).json()
        answer_id = first["answer_id"]
        assert len(answer_id) == 32
        again = httpx.get(f"{url}/api/answers/{answer_id}", timeout=30)
        assert again.status_code == 200 and again.json() == first
        streamed = httpx.get(f"{url}/api/answers/{answer_id}?stream=true", timeout=30)
        kinds = [k for k, _ in events_of(streamed.text.splitlines())]
        assert kinds[0] == "answer" and kinds[-1] == "done"
        assert httpx.get(f"{url}/api/answers/{'0' * 32}").status_code == 404
        assert httpx.get(f"{url}/api/answers/..%2F..%2Fetc").status_code == 404
    assert served_questions(lake) == [WATER_QUESTION]  # fetched again: still one delivery
    # After a restart the delivered answer is still there (served_answers keeps it).
    with serving(build_app(app.state.service.settings)) as url:
        assert httpx.get(f"{url}/api/answers/{answer_id}", timeout=30).json()["value"] == "0.18"


def test_a_reload_mid_answer_follows_the_same_answer(app, lake: Path, qa: QAServer) -> None:
    """A client reloading mid-answer follows the same answer by its id."""
    qa.default_delay = 0.8
    with serving(app) as url:
        with httpx.stream("POST", f"{url}/api/ask", json={"question": WATER_QUESTION, "stream": True}, timeout=30) as r:
            for line in r.iter_lines():  # the first event names the answer; then the client leaves
                if line.startswith("data: "):
                    answer_id = json.loads(line[6:])["answer_id"]
                    break
        running = httpx.get(f"{url}/api/answers/{answer_id}", timeout=30)
        assert running.status_code == 202 and running.json()["status"] in ("queued", "running")
        with httpx.stream("GET", f"{url}/api/answers/{answer_id}", headers={"Accept": "text/event-stream"},
                          timeout=30) as r:  # fmt: skip
            events = events_of(list(r.iter_lines()))
    assert events[0] == ("answer", {"answer_id": answer_id, "question": WATER_QUESTION, "config": "fake"})
    stages = [p["stage"] for k, p in events if k == "progress" and "stage" in p]
    # the stages from the start (no planner in this config: retrieving comes first)
    assert stages[0] == "retrieving" and stages[-1] == "done"
    done = events[-1][1]
    assert events[-1][0] == "done" and done["answer_id"] == answer_id and done["value"] == "0.18"
    assert qa.kinds()["answer"] == 1  # answered once
    assert served_questions(lake) == [WATER_QUESTION]


def test_clients_that_hang_up_give_their_queue_places_back(lake: Path, settings) -> None:
    """Questions whose clients hung up give their queue places back: the next client is not
    refused (429), and the abandoned ones never reach the model nor the served log."""
    with QAServer() as slow:
        slow.default_delay = 3.0  # the first question's one answer call holds the model past the 2 s grace
        write_config(lake, "slow", slow.base_url, max_concurrent=1)
        app = build_app(dataclasses.replace(settings, config="slow", queue_size=2))
        with serving(app) as url:
            first: dict[str, httpx.Response] = {}
            t = threading.Thread(
                target=lambda: first.update(r=httpx.post(f"{url}/api/ask", json={"question": Q_CARBON}, timeout=30))
            )
            t.start()
            wait_until(lambda: slow.requests)
            for q in (Q_GPU, Q_WATER):  # two clients wait their turn, then hang up
                with httpx.stream("POST", f"{url}/api/ask", json={"question": q, "stream": True}, timeout=30) as r:
                    for line in r.iter_lines():
                        if '"stage": "queued"' in line:
                            break
            plain = httpx.Client(timeout=httpx.Timeout(30, read=0.3))  # a plain request that gives up
            try:
                plain.post(f"{url}/api/ask", json={"question": Q_GPU, "unit": "W"})
            except httpx.ReadTimeout:
                pass
            hung_up = time.monotonic()
            time.sleep(max(0.0, hung_up + 2.3 - time.monotonic()))  # past the grace a reload would have
            later = httpx.post(f"{url}/api/ask", json={"question": Q_WATER}, timeout=30)
            t.join()
        assert later.status_code == 200, later.text  # not 429: no queue place is held by nobody
        assert first["r"].status_code == 200
        asked = " ".join(json.dumps(r.body) for r in slow.requests)
        assert Q_GPU not in asked  # the abandoned question never reached the model
    assert sorted(served_questions(lake)) == sorted([Q_CARBON, Q_WATER])


def test_a_second_client_of_the_same_question_keeps_it_alive(lake: Path, settings) -> None:
    with QAServer() as slow:
        slow.default_delay = 1.5  # the first question holds the model 3 s, past the 2 s grace
        write_config(lake, "slow", slow.base_url, max_concurrent=1)
        app = build_app(dataclasses.replace(settings, config="slow"))
        with serving(app) as url:
            blocker = threading.Thread(
                target=lambda: httpx.post(f"{url}/api/ask", json={"question": Q_CARBON}, timeout=30)
            )
            blocker.start()
            wait_until(lambda: slow.requests)
            stayed: dict[str, dict] = {}

            def stay() -> None:
                stayed.update(httpx.post(f"{url}/api/ask", json={"question": Q_WATER}, timeout=30).json())

            keeper = threading.Thread(target=stay)
            keeper.start()
            time.sleep(0.2)  # the plain client asks first
            with httpx.stream("POST", f"{url}/api/ask", json={"question": Q_WATER, "stream": True}, timeout=30) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        left_id = json.loads(line[6:])["answer_id"]
                        break
            keeper.join()
            blocker.join()
    assert stayed["value"] == "0.18" and stayed["answer_id"] == left_id  # one job for both


def test_the_time_shown_counts_the_wait_in_the_queue(lake: Path, settings) -> None:
    """The seconds shown count the wait in the queue, not only the model's time."""
    with QAServer() as slow:
        slow.default_delay = 0.6
        write_config(lake, "slow", slow.base_url, max_concurrent=1)
        app = build_app(dataclasses.replace(settings, config="slow"))
        with serving(app) as url:
            results: dict[str, dict] = {}

            def ask(q: str) -> None:
                started = time.monotonic()
                results[q] = httpx.post(f"{url}/api/ask", json={"question": q}, timeout=30).json()
                results[q]["waited"] = time.monotonic() - started

            t = threading.Thread(target=ask, args=(Q_CARBON,))
            t.start()
            wait_until(lambda: slow.requests)
            ask(Q_WATER)
            t.join()
    second = results[Q_WATER]
    assert second["queued_seconds"] > 0.3
    assert second["seconds"] >= second["queued_seconds"] + 0.3  # planning and answering after the wait
    assert second["seconds"] <= second["waited"] and second["seconds"] > 0.8 * second["waited"]


def test_stream_must_be_a_boolean(app) -> None:
    """`stream` must be a boolean: "stream": "yes" is a 400, not a plain request."""
    with serving(app) as url:
        for path, body in (
            ("/v1/chat/completions", {"model": "fake", "messages": [{"role": "user", "content": WATER_QUESTION}]}),
            ("/api/ask", {"question": WATER_QUESTION}),
        ):
            r = httpx.post(f"{url}{path}", json={**body, "stream": "yes"}, timeout=30)
            assert r.status_code == 400, (path, r.text)
            error = r.json()["error"]
            assert error["type"] == "invalid_request" and error["code"] == 400 and "stream" in error["message"]


def test_broken_configs_are_marked_unavailable_without_server_paths(app, lake: Path) -> None:
    """A broken config is listed as unavailable, with its reason and no server path."""
    (lake / "configs" / "broken.toml").write_text("[retrieval\nbudget_chars = 'x'\n")
    (lake / "configs" / "badkey.json").write_text(json.dumps({"retrieval": {"budget_charz": 100}}))
    with serving(app) as url:
        configs = {c["name"]: c for c in httpx.get(f"{url}/api/configs").json()["configs"]}
        models = {m["id"]: m for m in httpx.get(f"{url}/v1/models").json()["data"]}
        ask = httpx.post(f"{url}/api/ask", json={"question": WATER_QUESTION, "config": "broken"}, timeout=30)
    for name in ("broken", "badkey"):
        assert configs[name]["available"] is False and models[name]["available"] is False
        assert f"configs/{name}." in configs[name]["error"] and configs[name]["error"] == models[name]["error"]
    assert "budget_charz" in configs["badkey"]["error"]
    assert configs["fake"]["available"] is True and "available" not in models["fake"]
    assert ask.status_code == 400 and "configs/broken.toml" in ask.json()["error"]["message"]
    for text in (json.dumps(configs), json.dumps(models), ask.text):
        assert str(lake) not in text and str(lake.resolve()) not in text


def test_a_follow_up_is_answered_as_a_standalone_question(app, qa: QAServer) -> None:
    """A follow-up is rewritten from its `history` and answered as a standalone question."""
    history = [
        {"role": "user", "content": "How many watts did the A100 GPU draw?"},
        {"role": "assistant", "content": "400 W"},
    ]
    follow_up = "And the water usage effectiveness?"
    with serving(app) as url:
        r = httpx.post(f"{url}/api/ask", json={"question": follow_up, "history": history}, timeout=30)
        assert r.status_code == 200, r.text
        body = r.json()
        with httpx.stream("POST", f"{url}/api/ask", json={"question": follow_up, "history": history, "stream": True},
                          timeout=30) as s:  # fmt: skip
            events = events_of(list(s.iter_lines()))
        bad = httpx.post(f"{url}/api/ask", json={"question": follow_up, "history": "earlier"}, timeout=30)
    assert body["standalone_question"] == WATER_QUESTION and body["asked"] == follow_up
    assert body["question"] == WATER_QUESTION and body["value"] == "0.18"
    rewrite = next(r for r in qa.requests if "Conversation so far" in json.dumps(r.body))
    assert "400 W" in json.dumps(rewrite.body)
    named = [p for k, p in events if k == "answer" and "standalone_question" in p]
    assert named and named[0]["standalone_question"] == WATER_QUESTION  # shown while it is answered
    assert events[-1][1]["stored"] is True  # the same standalone question again: the stored answer
    assert bad.status_code == 400 and "history" in bad.json()["error"]["message"]
