"""Hostile JSON gets a 400 that says why, never a 500: a body nested 30,000 deep, a
5,000-digit integer, a lone surrogate in a string (as a key too), NaN, posted to the ask, the
feedback and the OpenAI-compatible routes of a real uvicorn on 127.0.0.1."""

from __future__ import annotations

import shutil

import httpx
import pytest

from kohaku_rag.serving.app import build_app
from kohaku_rag.serving.settings import ServeSettings
from tests.support.asgi_server import serving
from tests.support.qa_server import QAServer
from tests.support.serving_corpus import WATER_QUESTION, write_config

ROUTES = ("/api/ask", "/api/feedback", "/v1/chat/completions", "/api/search")
DEEP = b'{"question": ' + b"[" * 30_000 + b"]" * 30_000 + b"}"  # under the 64 KB body cap
HUGE_INT = b'{"question": "q", "answer_id": "a", "max_tokens": 1' + b"0" * 4_999 + b"}"
# JSON's \ud800 escape: valid JSON text, but no character (it cannot be written as UTF-8)
LONE = (
    b'{"question": "water \\ud800 usage", "answer_id": "\\udfff", "comment": "\\ud800",'
    b' "messages": [{"role": "user", "content": "\\ud800"}]}'
)
LONE_KEY = b'{"\\udc80": 1, "question": "q"}'
RAW_SURROGATE = b'{"question": "water \xed\xa0\x80 usage"}'  # json.loads reads these bytes as \ud800
NAN = b'{"question": "q", "answer_id": "a", "budget_chars": NaN}'

CASES = {
    "deep": (DEEP, "nested more than"),
    "huge_int": (HUGE_INT, "5000 digits"),
    "lone_surrogate": (LONE, "lone surrogate"),
    "lone_surrogate_key": (LONE_KEY, "lone surrogate"),
    "raw_surrogate": (RAW_SURROGATE, "lone surrogate"),
    "nan": (NAN, "NaN is not JSON"),
}


@pytest.fixture(scope="module")
def hostile_results(built_lake, tmp_path_factory) -> dict[tuple[str, str], httpx.Response]:
    """Every case posted to every route of one server (none may reach the model)."""
    lake = shutil.copytree(built_lake, tmp_path_factory.mktemp("hostile") / "lake")
    results = {}
    with QAServer() as qa:
        write_config(lake, "fake", qa.base_url)
        with serving(build_app(ServeSettings(lake=lake, config="fake"))) as url:
            for route in ROUTES:
                for name, (body, _why) in CASES.items():
                    headers = {"Content-Type": "application/json"}
                    results[(route, name)] = httpx.post(f"{url}{route}", content=body, headers=headers, timeout=60)
            # the server is still well: a good question is answered
            good = httpx.post(f"{url}/api/ask", json={"question": WATER_QUESTION}, timeout=60)
            results[("/api/ask", "good")] = good
    return results


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", CASES)
def test_hostile_json_is_a_400_with_the_reason(hostile_results, route: str, case: str) -> None:
    """A body nested too deep, an integer too long or a lone surrogate is a 400 that says why,
    never a 500 from Python's recursion, int-digits or encoding limits."""
    response = hostile_results[(route, case)]
    assert response.status_code == 400, (response.status_code, response.text[:300])
    error = response.json()["error"]
    assert CASES[case][1] in error["message"] and error["type"] == "invalid_request", error
    assert "Traceback" not in response.text and len(response.text) < 1000


def test_the_server_answers_on(hostile_results) -> None:
    assert hostile_results[("/api/ask", "good")].status_code == 200
