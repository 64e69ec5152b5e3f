"""The hostile test's input rows, each held or FAILED, in one process with no model: a table
query that types its own value, a prefix state of another prompt in place of the right one,
junk in the states folder, hostile JSON on every JSON route, `X-Forwarded-For` from a peer
that is no proxy, a `javascript:` link, and a derived config's credentials.

    .venv/bin/python bench/faults/faults_inputs.py

The served rows run against the real Starlette app in-process (Starlette's TestClient, whose
peer address is "testclient"); they need no index, as every refusal comes before search. The
forwarded-header row checks the app's own rule; that uvicorn itself no longer believes the
header from loopback is tests/serving/test_serve_trusted_proxy.py, with real processes.
"""

from __future__ import annotations

import ctypes
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from starlette.testclient import TestClient  # noqa: E402

from kohaku_rag.answering.qa_config_file import dump_derived, load_qa_config  # noqa: E402
from kohaku_rag.answering.table_query import run_query, table_frame, value_of  # noqa: E402
from kohaku_rag.document.table_record import GROUP_SEP, TableRecord, TableRow, table_text  # noqa: E402
from kohaku_rag.llm.prefix_states import PrefixStates, state_file_name  # noqa: E402
from kohaku_rag.retrieval.context import ContextItem  # noqa: E402
from kohaku_rag.serving.app import build_app  # noqa: E402
from kohaku_rag.serving.settings import ServeSettings  # noqa: E402
from kohaku_rag.web_links import web_link  # noqa: E402

RECORD = TableRecord(
    label="Table 2",
    caption="Table 2. Mean and standard deviation of energy per 1,000 queries.",
    label_header="task",
    columns=(f"inference energy (kWh){GROUP_SEP}mean", f"inference energy (kWh){GROUP_SEP}std"),
    rows=(
        TableRow("text classification", ("0.002", "0.001")),
        TableRow("text generation", ("0.047", "0.03")),
        TableRow("image generation", ("2.907", "3.31")),
    ),
)
TYPED = (
    "SELECT 50000000000000",
    "SELECT 'see http://evil.example/login' FROM t",
    "SELECT current_setting('allowed_directories')",
    "SELECT repeat('x', 1500000000) FROM t",
)
IDENTITY = '["model.gguf", 512]'
PROMPT_A, PROMPT_B = tuple(range(100, 140)), tuple(range(200, 240))
HOSTILE_JSON = {
    "nested 30,000 deep": b'{"question": ' + b"[" * 30_000 + b"]" * 30_000 + b"}",
    "a 5,000-digit integer": b'{"question": "q", "max_tokens": 1' + b"0" * 4_999 + b"}",
    "a lone surrogate": b'{"question": "water \\ud800 usage", "messages": [{"role": "user", "content": "\\ud800"}]}',
    "NaN": b'{"question": "q", "budget_chars": NaN}',
}


def row(name: str, held: bool, detail: str) -> bool:
    print(f"{name:<58} {'held' if held else 'FAILED'}: {detail}")
    return held


def typed_values() -> bool:
    frame = table_frame(ContextItem("d", "d:sec1:p2", "paragraph", 6, 1.0, table_text(RECORD), "table", table=RECORD))
    assert frame is not None
    refused = [sql for sql in TYPED if run_query(sql, frame) is None]
    computed = value_of(
        run_query("SELECT max(inference_energy_kwh_mean) / min(inference_energy_kwh_mean) FROM t", frame)
    )
    held = len(refused) == len(TYPED) and computed is not None
    return row(
        "sql: a value the query types itself",
        held,
        f"{len(refused)}/{len(TYPED)} refused; a ratio of cells: {computed}",
    )


def _saved(folder: Path, key: tuple[int, ...], body: bytes) -> Path:
    buffer = (ctypes.c_uint8 * len(body)).from_buffer_copy(body)
    PrefixStates(directory=folder, identity=IDENTITY)._write(key, buffer, len(body))
    return folder / state_file_name(IDENTITY, key)


def prefix_states(work: Path) -> list[bool]:
    folder = work / "prefix-states"
    a = _saved(folder, PROMPT_A, b"kv of prompt A" * 10)
    b = _saved(folder, PROMPT_B, b"kv of prompt B" * 10)
    shutil.copy(b, a)  # B's state under A's name
    loaded = PrefixStates(directory=folder, identity=IDENTITY)._read(PROMPT_A)
    other = row(
        "prefix state: another prompt's state in the right place",
        loaded is None and not a.exists(),
        "deleted, not loaded" if loaded is None else "LOADED for the wrong prompt",
    )
    junk = [folder / "notes.txt", folder / ("0" * 40 + ".kv")]
    junk[0].write_text("not a state")
    junk[1].write_bytes(b"garbage, not a state file")
    PrefixStates(directory=folder, identity=IDENTITY)._read(PROMPT_B)  # the first use opens the folder
    left = [p.name for p in junk if p.exists()]
    removed = row("prefix state: junk in the states folder", not left, f"left: {left or 'nothing'}")
    return [other, removed]


def hostile_json(work: Path) -> bool:
    app = build_app(ServeSettings(lake=work / "lake"))
    codes: dict[str, int] = {}
    with TestClient(app, raise_server_exceptions=False) as client:
        for route in ("/api/ask", "/api/feedback", "/v1/chat/completions"):
            for name, body in HOSTILE_JSON.items():
                r = client.post(route, content=body, headers={"Content-Type": "application/json"})
                codes[f"{route} {name}"] = r.status_code
    bad = {k: v for k, v in codes.items() if v != 400}
    return row(
        "json: deep, long integers, surrogates, NaN on 3 routes",
        not bad,
        f"{len(codes) - len(bad)}/{len(codes)} a 400 {bad or ''}",
    )


def forwarded_for(work: Path) -> bool:
    app = build_app(ServeSettings(lake=work / "lake", feedback_per_minute=5))
    body = {"answer_id": "0" * 32, "verdict": "right"}
    with TestClient(app) as client:
        codes = [
            client.post("/api/feedback", json=body, headers={"X-Forwarded-For": f"10.0.0.{i}"}).status_code
            for i in range(10)
        ]
    let_through = sum(code != 429 for code in codes)
    return row(
        "rate: X-Forwarded-For from a peer that is no proxy",
        let_through == 5,
        f"{let_through} of 10 let through (limit 5)",
    )


def links() -> bool:
    hostile = ["javascript:alert(document.domain)", "data:text/html,<script>1</script>", " JavaScript:x", "http://"]
    kept = [u for u in hostile if web_link(u)]
    good = web_link("https://arxiv.org/abs/2104.10350")
    return row(
        "links: javascript:, data: and hostless URLs",
        not kept and bool(good),
        f"kept {kept or 'none'}; https kept: {bool(good)}",
    )


def derived_config(work: Path) -> bool:
    folder = work / "configs"
    folder.mkdir()
    secret = "sk-SECRET-1234"
    base = {
        "generation": {
            "llm": {
                "backend": "openai",
                "model": "m",
                "base_url": f"https://user:{secret}@llm.example/v1?api-key={secret}",
                "api_key_env": None,
            }
        }
    }
    (folder / "a.json").write_text(json.dumps(base))
    questions = work / "q2.csv"
    questions.write_text("id,question,answer_unit\nq1,What?,is_blank\n")
    derived = folder / "a--q2.json"
    derived.write_text(dump_derived("a", questions))
    loaded = load_qa_config(derived)
    held = secret not in derived.read_text() and str(loaded.questions).endswith("q2.csv")
    return row(
        "configs: a derived config copies no credential",
        held,
        f"secret in the derived file: {secret in derived.read_text()}",
    )


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        results = [
            typed_values(),
            *prefix_states(work),
            hostile_json(work),
            forwarded_for(work),
            links(),
            derived_config(work),
        ]
    print(f"{sum(results)} of {len(results)} held")
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
