"""`kohaku serve` outlives its model: the bundled model's process killed mid-answer is an error
event naming the signal and the fix for that asker, and the next question is answered by a
new model process (a real `kohaku serve`, the real llama.cpp model, a signal from outside)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import httpx
import pytest

from tests.support.serve_process import kohaku_serve
from tests.support.serving_corpus import WATER_QUESTION, write_bundled_config

pytest.importorskip("llama_cpp")


def model_processes_of(lake: Path) -> list[int]:
    """The model processes whose parent is the `kohaku serve` of this lake."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
            parent_cmd = Path(f"/proc/{parent}/cmdline").read_bytes()
        except OSError:
            continue
        if b"kohaku_rag.llm.model_process" in cmd and str(lake).encode() in parent_cmd:
            found.append(int(pid))
    return found


def events_of(response: httpx.Response):
    """(event, data) pairs of an SSE stream, as they arrive."""
    name = "message"
    for line in response.iter_lines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            yield name, json.loads(line[len("data: ") :])
            name = "message"


def test_serve_answers_the_next_question_after_its_model_process_is_killed(lake: Path) -> None:
    write_bundled_config(lake)
    with kohaku_serve(lake, "--config", "bundled") as url, httpx.Client(base_url=url, timeout=600) as client:
        body = {"question": WATER_QUESTION, "unit": "L/kWh", "stream": True}
        killed: list[int] = []
        last: tuple[str, dict] | None = None
        with client.stream("POST", "/api/ask", json=body) as res:
            for name, data in events_of(res):
                if name == "progress" and "reply" in data and not killed:
                    (pid,) = model_processes_of(lake)
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                last = (name, data)
        assert killed, "the model never started writing"
        assert last is not None and last[0] == "error", last
        message = last[1]["error"]["message"]
        assert "the model process (llama.cpp, CPU variant" in message and "died with SIGKILL" in message
        assert "The next question starts it again" in message and "Traceback" not in message

        again = client.post("/api/ask", json={"question": "What was the water usage effectiveness?", "unit": "L/kWh"})
        assert again.status_code == 200, again.text
        assert again.json()["answer"] not in ("", None)
        (new_pid,) = model_processes_of(lake)
        assert new_pid != killed[0]
