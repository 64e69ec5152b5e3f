"""Safe by default: the bearer key, the refusal to listen beyond loopback without one, and
the bounded queue (429 with Retry-After), through a real uvicorn on 127.0.0.1."""

from __future__ import annotations

import argparse
import dataclasses
import threading
import time

import httpx
import pytest

from kohaku_assets.cli.serve import serve_settings
from kohaku_assets.resources import KohakuSettings
from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.serving.app import build_app
from kohaku_rag.serving.service import AnswerService
from tests.support.asgi_server import serving
from tests.support.qa_server import QUESTIONS, QAServer
from tests.support.serving_corpus import WATER_QUESTION, write_config
from tests.support.waiting import wait_until

# `kohaku` from this checkout (the installed script may belong to another one)
KOHAKU = "import sys; from kohaku_assets.cli import main; sys.exit(main(sys.argv[1:]))"


def test_a_key_guards_every_request_but_the_page(settings) -> None:
    app = build_app(dataclasses.replace(settings, api_key="s3cret-key"))
    with serving(app) as url:
        assert httpx.get(f"{url}/healthz").status_code == 401
        wrong = httpx.get(f"{url}/api/documents", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401 and wrong.json()["error"]["code"] == 401
        assert "s3cret" not in wrong.text
        assert httpx.post(f"{url}/v1/chat/completions", json={}).status_code == 401
        ok = httpx.get(f"{url}/healthz", headers={"Authorization": "Bearer s3cret-key"})
        assert ok.status_code == 200
        assert httpx.get(f"{url}/").status_code == 200  # the page's files hold no data
        assert httpx.get(f"{url}/static/app.js").status_code == 200


def _args(**kw: object) -> argparse.Namespace:
    base = {"host": "127.0.0.1", "api_key_env": None, "no_auth": False, "config": None, "cors": None}
    return argparse.Namespace(**{**base, **kw})


def test_non_loopback_needs_a_key_or_no_auth(lake, monkeypatch: pytest.MonkeyPatch) -> None:
    ks = KohakuSettings(lake_root=str(lake), corpus_dir=str(lake / "corpus"))
    assert serve_settings(_args(), ks)[1] is None
    with pytest.raises(ValueError, match="--api-key-env VAR"):
        serve_settings(_args(host="0.0.0.0"), ks)
    served, warning = serve_settings(_args(host="0.0.0.0", no_auth=True), ks)
    assert served.api_key is None and warning and "without authentication" in warning
    with pytest.raises(ValueError, match="not set"):
        serve_settings(_args(host="0.0.0.0", api_key_env="KOHAKU_TEST_KEY"), ks)
    monkeypatch.setenv("KOHAKU_TEST_KEY", "k-123")
    served, warning = serve_settings(_args(host="0.0.0.0", api_key_env="KOHAKU_TEST_KEY"), ks)
    assert served.api_key == "k-123" and warning is None
    with pytest.raises(ValueError, match="--config nope: no nope.toml"):
        serve_settings(_args(config="nope"), ks)
    assert serve_settings(_args(config="fake"), ks)[0].config == "fake"
    with pytest.raises(ValueError, match="not the key itself"):
        serve_settings(_args(api_key_env="sk-abcdefghijklmnopqrstuvwxyz0123456789"), ks)


def test_a_full_queue_answers_429_with_retry_after(lake, settings) -> None:
    with QAServer() as slow:
        slow.default_delay = 1.0
        write_config(lake, "slow", slow.base_url, max_concurrent=1)
        app = build_app(dataclasses.replace(settings, config="slow", queue_size=1))
        questions = list(QUESTIONS)
        with serving(app) as url:
            results: dict[str, httpx.Response] = {}

            def ask(q: str) -> None:
                results[q] = httpx.post(f"{url}/api/ask", json={"question": q}, timeout=30)

            threads = [threading.Thread(target=ask, args=(q,)) for q in questions[:2]]
            for t in threads:
                t.start()
            # one answering, one waiting: the next is refused at once
            deadline = threading.Event()
            for _ in range(100):
                if slow.requests:
                    break
                deadline.wait(0.05)
            refused = httpx.post(f"{url}/api/ask", json={"question": questions[2]}, timeout=30)
            streamed = httpx.post(f"{url}/api/ask", json={"question": questions[2], "stream": True}, timeout=30)
            for t in threads:
                t.join()
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
        assert refused.json()["error"]["type"] == "queue_full"
        assert streamed.status_code == 429
        assert all(r.status_code == 200 for r in results.values())
        assert slow.max_in_flight == 1  # max_concurrent = 1: one request at a time


def test_the_bundled_model_takes_one_question_at_a_time(settings) -> None:
    service = AnswerService(settings)
    assert service.gate(QAConfig()).concurrency == 1  # backend "llama"
    cfg = service.named_config("fake").config
    assert service.gate(cfg).concurrency == cfg.generation.llm.max_concurrent == 4


def test_stored_answer_returns_while_the_queue_is_busy(settings, qa: QAServer) -> None:
    with serving(build_app(settings)) as url:
        first = httpx.post(f"{url}/api/ask", json={"question": WATER_QUESTION}, timeout=30).json()
        qa.default_delay = 5.0
        again = httpx.post(f"{url}/api/ask", json={"question": WATER_QUESTION}, timeout=3)
        assert again.json()["stored"] is True and again.json()["value"] == first["value"]


def test_kohaku_serve_starts_uvicorn_and_answers(lake) -> None:
    import os
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "KOHAKU_LAKE": str(lake), "KOHAKU_TEST_SERVE_KEY": "t0ken"}
    cmd = [sys.executable, "-c", KOHAKU, "serve", "--lake", str(lake), "--port", str(port),
           "--api-key-env", "KOHAKU_TEST_SERVE_KEY"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/healthz", headers={"Authorization": "Bearer t0ken"})
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "kohaku serve did not start"
                time.sleep(0.2)
        assert r.json() == {"status": "ok", "documents": 3}
        assert httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 401
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=20)
    assert f"http://127.0.0.1:{port}/" in out and "t0ken" not in out + err


def test_without_an_index_asking_is_a_503(tmp_path) -> None:
    from starlette.testclient import TestClient

    from kohaku_rag.serving.settings import ServeSettings

    with TestClient(build_app(ServeSettings(lake=tmp_path / "empty"))) as c:
        health = c.get("/healthz")  # what search meets: no index
        assert health.status_code == 503 and "no index" in health.json()["error"]
        r = c.post("/api/ask", json={"question": "anything?"})
        assert r.status_code == 503 and "no index" in r.json()["error"]["message"]
        assert c.get("/api/documents").json() == {"documents": []}


def test_a_waiting_question_hears_its_place_at_once(lake, settings) -> None:
    with QAServer() as slow:
        slow.default_delay = 1.5
        write_config(lake, "slow", slow.base_url, max_concurrent=1)
        app = build_app(dataclasses.replace(settings, config="slow"))
        questions = list(QUESTIONS)
        with serving(app) as url:
            finished: list[float] = []

            def first() -> None:
                httpx.post(f"{url}/api/ask", json={"question": questions[0]}, timeout=30)
                finished.append(time.monotonic())

            t = threading.Thread(target=first)
            t.start()
            wait_until(lambda: slow.requests, what="the first question to reach the model")
            heard: list[tuple[float, str]] = []
            body = {"question": questions[1], "stream": True}
            with httpx.stream("POST", f"{url}/api/ask", json=body, timeout=30) as r:
                for line in r.iter_lines():
                    if line.startswith("data: "):
                        heard.append((time.monotonic(), line))
            t.join()
        queued_at, queued = heard[1]  # after the answer's id
        assert '"stage": "queued"' in queued and '"place": 1' in queued
        assert queued_at < finished[0]  # told while the first question was still answering
