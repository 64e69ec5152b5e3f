"""The JSON API on the ASGI app (Starlette's httpx test client): every endpoint, progress
events, errors as JSON, stored answers and the served_answers table."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import kohaku_rag as kr
from kohaku_rag.lake.layout import Lake
from kohaku_rag.serving.served_answers import all_rows
from tests.support.qa_server import QAServer
from tests.support.serving_corpus import WATER_QUESTION, WATER_URL
from tests.support.sse_text import sse_events


@pytest.fixture()
def client(app):
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def test_healthz_counts_documents(client) -> None:
    r = client.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok", "documents": 3}


def test_search_returns_context_with_pages_and_titles(client) -> None:
    r = client.post("/api/search", json={"question": "water usage effectiveness", "budget_chars": 800})
    assert r.status_code == 200
    context = r.json()["context"]
    assert context and context[0]["doc_id"] == "water"
    assert set(context[0]) >= {"doc_id", "node_id", "kind", "page", "score", "text", "title"}
    assert context[0]["page"] == 1 and context[0]["title"] == "Water report"
    assert sum(len(c["text"]) for c in context) <= 800


def test_ask_answers_with_citations_and_stores_the_answer(client, lake: Path, qa: QAServer) -> None:
    r = client.post("/api/ask", json={"question": WATER_QUESTION, "unit": "L/kWh"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["value"] == "0.18" and body["unit"] == "L/kWh" and body["refs"] == ["water"]
    assert body["config"] == "fake" and body["stored"] is False and body["seconds"] > 0
    cited = body["cited"]
    assert cited and cited[0]["doc_id"] == "water" and cited[0]["url"] == WATER_URL
    assert "0.18" in cited[0]["quote"] and cited[0]["quote"] in cited[0]["text"]
    assert cited[0]["sentence_id"].startswith(cited[0]["node_id"])
    assert body["context"] and body["raw"] and body["raw"][-1]["reply"]
    call = body["raw"][-1]
    assert call["prompt_tokens"] > 0 and call["reply_tokens"] > 0 and call["cached"] is False
    assert call["evaluated"] is None and body["usage"]["prompt_tokens_evaluated"] is None  # the server does not say
    asked = len(qa.requests)
    again = client.post("/api/ask", json={"question": WATER_QUESTION, "unit": "L/kWh"}).json()
    assert again["stored"] is True and again["value"] == "0.18" and again["cited"] == cited
    assert len(qa.requests) == asked  # the stored answer, no LLM call
    rows = all_rows(Lake(lake))
    assert [(r["question"], r["stored"]) for r in rows] == [(WATER_QUESTION, False), (WATER_QUESTION, True)]
    assert rows[0]["refs"] == ["water"] and rows[0]["config"] == "fake" and rows[0]["value"] == "0.18"
    assert "127.0.0.1" not in json.dumps(rows, default=str) and "testclient" not in json.dumps(rows, default=str)


def test_stored_answers_survive_a_restart(app, settings, qa: QAServer) -> None:
    from kohaku_rag.serving.app import build_app

    with TestClient(app) as c:
        c.post("/api/ask", json={"question": WATER_QUESTION, "unit": "L/kWh"})
    asked = len(qa.requests)
    with TestClient(build_app(settings)) as c:
        assert c.post("/api/ask", json={"question": WATER_QUESTION, "unit": "L/kWh"}).json()["stored"] is True
    assert len(qa.requests) == asked


def test_ask_streams_progress_then_the_answer(client) -> None:
    with client.stream("POST", "/api/ask", json={"question": WATER_QUESTION, "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r.read().decode())
    assert events[0][0] == "answer" and len(events[0][1]["answer_id"]) == 32
    stages = [p["stage"] for kind, p in events if kind == "progress" and "stage" in p]
    # no planner in this config, so no "planning" stage (it was announced before any did run)
    assert stages[:2] == ["retrieving", "answering"] and "planning" not in stages and stages[-1] == "done"
    # the model's reply as it is written (the fake model streams it in pieces): the answer's JSON
    pieces = [p["reply"] for kind, p in events if kind == "progress" and "reply" in p]
    assert len(pieces) > 2 and '"answer_value": "0.18"' in "".join(pieces)
    kind, answer = events[-1]
    assert kind == "done" and answer["value"] == "0.18" and answer["answer_id"] == events[0][1]["answer_id"]


def test_ask_streams_with_the_accept_header_too(client) -> None:
    headers = {"Accept": "text/event-stream"}
    with client.stream("POST", "/api/ask", json={"question": WATER_QUESTION}, headers=headers) as r:
        events = sse_events(r.read().decode())
    assert events[-1][0] == "done"


def test_documents_list_and_detail(client) -> None:
    docs = {d["doc_id"]: d for d in client.get("/api/documents").json()["documents"]}
    assert sorted(docs) == ["carbon", "gpu", "water"]
    assert docs["water"]["format"] == "pdf" and docs["water"]["pages"] == 1 and docs["water"]["url"] == WATER_URL
    assert docs["gpu"]["pages"] is None
    water = client.get("/api/documents/water").json()
    assert water["title"] == "Water report" and [s["title"] for s in water["sections"]][-1] == "1 Cooling"


def test_node_text_marks_the_sentence(client) -> None:
    ctx = client.post("/api/search", json={"question": "How many watts did the A100 GPU draw?"}).json()["context"]
    para = next(c for c in ctx if c["doc_id"] == "gpu" and c["kind"] == "paragraph" and "400 W" in c["text"])
    r = client.get("/api/documents/gpu/text", params={"highlight": f"{para['node_id']}:s1"})
    parts = r.json()["parts"]
    assert [p["marked"] for p in parts][0] is True and "400 W" in parts[0]["text"]
    assert "".join(p["text"] for p in parts) == para["text"]


def test_configs_list_names_with_scores(client) -> None:
    body = client.get("/api/configs").json()
    names = [c["name"] for c in body["configs"]]
    assert names == ["default", "fake"] and body["default"] == "fake"
    assert all("final" in c for c in body["configs"])


def test_openapi_describes_every_route(client, app) -> None:
    schema = client.get("/openapi.json").json()
    assert schema["openapi"].startswith("3.")
    paths = {getattr(r, "path", "") for r in app.routes} - {"/", "/static"}
    assert paths <= set(schema["paths"]), paths - set(schema["paths"])


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/api/ask", {"question": ""}, 400),
        ("POST", "/api/ask", {"question": "x" * 2001}, 400),
        ("POST", "/api/ask", {"question": 3}, 400),
        ("POST", "/api/ask", {"question": "q", "config": "../../etc/passwd"}, 400),
        ("POST", "/api/ask", {"question": "q", "config": "nope"}, 404),
        ("POST", "/api/search", {"question": "q", "budget_chars": -5}, 400),
        ("GET", "/api/documents/..%2F..%2Fetc", None, 404),
        ("GET", "/api/documents/.hidden", None, 400),
        ("GET", "/api/documents/nope", None, 404),
        ("GET", "/api/documents/water/pages/0.png", None, 404),
        ("GET", "/api/documents/water/pages/2.png", None, 404),
        ("GET", "/api/documents/water/pages/..png", None, 400),
        ("GET", "/api/documents/water/pages/1.png?highlight=gpu:sec1:p1", None, 404),
        ("GET", "/api/documents/gpu/pages/1.png", None, 404),
        ("GET", "/api/nothing", None, 404),
        ("DELETE", "/api/ask", None, 405),
    ],
)
def test_bad_requests_get_a_json_error(client, method, path, body, status) -> None:
    r = client.request(method, path, json=body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["message"] and error["code"] == status
    assert "Traceback" not in r.text


def test_malformed_json_and_oversized_bodies(client) -> None:
    r = client.post("/api/ask", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not JSON" in r.json()["error"]["message"]
    r = client.post("/api/ask", content=b"[1]", headers={"content-type": "application/json"})
    assert r.status_code == 400
    r = client.post("/api/ask", content=json.dumps({"question": "a" * 70_000}).encode())
    assert r.status_code == 413 and r.json()["error"]["code"] == 413

    def chunks():  # no Content-Length: the cap counts the streamed bytes
        for _ in range(100):
            yield b"x" * 1000

    r = client.post("/api/ask", content=chunks())
    assert r.status_code == 413


def test_a_failing_llm_is_a_json_502(client, qa: QAServer) -> None:
    qa.outage = True
    r = client.post("/api/ask", json={"question": WATER_QUESTION})
    assert r.status_code == 502 and "LLM" in r.json()["error"]["message"]
    assert "Traceback" not in r.text


def test_no_cors_headers_unless_asked(client) -> None:
    r = client.get("/healthz", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in r.headers
    r = client.options("/api/ask", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in r.headers


def test_cors_for_the_given_origin_only(settings) -> None:
    import dataclasses

    from kohaku_rag.serving.app import build_app

    app = build_app(dataclasses.replace(settings, cors_origin="https://team.example"))
    with TestClient(app) as c:
        ok = c.get("/healthz", headers={"Origin": "https://team.example"})
        assert ok.headers["access-control-allow-origin"] == "https://team.example"
        other = c.get("/healthz", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in other.headers


def test_a_reassembled_index_is_picked_up_without_a_restart(client, lake, built_lake) -> None:
    corpus = built_lake.parent / "corpus"
    assert client.get("/healthz").json()["documents"] == 3
    before = client.post("/api/search", json={"question": "tidal turbines in the estuary"}).json()["context"]
    assert all(c["doc_id"] != "tides" for c in before)
    mine = Path(shutil.copytree(corpus, lake.parent / "corpus"))
    (mine / "tides.md").write_text(
        "# Tides\n\n## 1 Power\n\nThe tidal turbines in the estuary produced 12 MW at peak flow.\n"
    )
    summary = kr.index(mine, lake, progress=lambda _m: None)
    assert summary.recomputed == ["tides"]
    assert client.get("/healthz").json()["documents"] == 4
    after = client.post("/api/search", json={"question": "tidal turbines in the estuary"}).json()["context"]
    assert after[0]["doc_id"] == "tides"


def test_kohaku_serve_refuses_an_open_host_without_a_key(lake, capsys) -> None:
    from kohaku_assets.cli import main

    assert main(["serve", "--lake", str(lake), "--host", "0.0.0.0"]) == 2
    assert "--api-key-env VAR" in capsys.readouterr().err
