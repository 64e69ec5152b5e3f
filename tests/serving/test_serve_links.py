"""Only http(s) links reach a client: a document's URL from metadata.csv (or from a lake
indexed before this rule) that is `javascript:`, `data:` or any other scheme is served as
"" in the document info, the answer's citations and the OpenAI references, through a real
uvicorn on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest

from kohaku_rag.indexing.corpus import read_metadata_checked
from kohaku_rag.indexing.steps import SOURCES
from kohaku_rag.lake.layout import Lake
from kohaku_rag.serving.app import build_app
from kohaku_rag.serving.served_store import connection, transaction
from kohaku_rag.web_links import web_link
from tests.support.asgi_server import serving
from tests.support.browser import chromium, chromium_missing
from tests.support.serving_corpus import WATER_QUESTION

HOSTILE = "javascript:alert(document.domain)"


def _set_source_url(lake: Path, doc_id: str, url: str) -> None:
    """The lake as an older index left it: the URL stored as metadata.csv gave it."""
    path = Lake(lake).table(SOURCES, doc_id)
    table = pq.read_table(path)
    column = table.schema.get_field_index("url")
    table = table.set_column(column, table.schema.field(column), [[url] * table.num_rows])
    pq.write_table(table, path)


def test_a_javascript_url_in_the_lake_is_never_served(app, lake: Path) -> None:
    """A `javascript:` URL in the lake never reaches the page as a source link."""
    _set_source_url(lake, "water", HOSTILE)
    with serving(app) as url:
        asked = httpx.post(f"{url}/api/ask", json={"question": WATER_QUESTION}, timeout=60).json()
        listed = httpx.get(f"{url}/api/documents").json()["documents"]
        one = httpx.get(f"{url}/api/documents/water").json()
        chat = httpx.post(
            f"{url}/v1/chat/completions",
            json={"model": "fake", "messages": [{"role": "user", "content": WATER_QUESTION}]},
            timeout=60,
        ).json()
    assert asked["cited"] and asked["cited"][0]["doc_id"] == "water"
    assert [c["url"] for c in asked["cited"]] == [""] * len(asked["cited"])
    assert next(d for d in listed if d["doc_id"] == "water")["url"] == "" and one["url"] == ""
    message = chat["choices"][0]["message"]
    assert [r["url"] for r in message["references"]] == [""] * len(message["references"])
    assert message["annotations"] == []
    for body in (asked, listed, one, chat):
        assert "javascript" not in str(body)


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("https://example.org/a.pdf", "https://example.org/a.pdf"),
        ("  HTTP://Example.org/a?b=1#c ", "HTTP://Example.org/a?b=1#c"),
        (HOSTILE, ""),
        (" JavaScript:alert(1)", ""),
        ("java\tscript:alert(1)", ""),
        ("data:text/html,<script>alert(1)</script>", ""),
        ("vbscript:msgbox(1)", ""),
        ("file:///etc/passwd", ""),
        ("//evil.example/x", ""),
        ("https:/no-host", ""),
        ("https://example.org/a b.pdf", "https://example.org/a b.pdf"),  # a space is no scheme
        ("https://example.org/\x00", ""),
        ("", ""),
    ],
)
def test_web_link_keeps_only_http_and_https(given: str, kept: str) -> None:
    assert web_link(given) == kept


def test_metadata_drops_a_link_that_is_not_http_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "metadata.csv").write_text(f"id,title,url\nwater,Water,{HOSTILE}\ngpu,GPU,https://example.org/g\n")
    rows, warnings = read_metadata_checked(tmp_path)
    assert rows["water"].url == "" and rows["gpu"].url == "https://example.org/g"
    assert len(warnings) == 1 and "line 2" in warnings[0] and "only http:// and https://" in warnings[0]


def test_a_stored_answer_from_before_the_rule_is_served_without_its_link(app, settings, lake: Path) -> None:
    """An answer stored with a `javascript:` citation is served without that link."""
    with serving(app) as url:
        first = httpx.post(f"{url}/api/ask", json={"question": WATER_QUESTION}, timeout=60).json()
    with connection(Lake(lake)) as db, transaction(db):
        for seq, response in db.execute("SELECT seq, response FROM answers").fetchall():
            kept = json.loads(response)
            kept["cited"] = [{**c, "url": HOSTILE} for c in kept["cited"]]
            db.execute("UPDATE answers SET response = ? WHERE seq = ?", (json.dumps(kept), seq))
    with serving(build_app(settings)) as url:  # a new process: the answers come from the store
        again = httpx.post(f"{url}/api/ask", json={"question": WATER_QUESTION}, timeout=60).json()
        by_id = httpx.get(f"{url}/api/answers/{first['answer_id']}").json()
    assert again["stored"] is True and again["cited"]
    for body in (again, by_id):
        assert [c["url"] for c in body["cited"]] == [""] * len(body["cited"]), body["cited"]


@pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")
def test_the_page_makes_a_source_link_of_a_web_url_only(app) -> None:
    """The page's own check (a stored answer or another server could still send one): in a
    real headless Chromium, the function the evidence link is built with."""
    with serving(app) as url, chromium() as driver:
        driver.get(url + "/")
        given = [HOSTILE, " JaVaScRiPt:alert(1)", "java\tscript:alert(1)", "data:text/html,x", "/relative", "",
                 None, "https://example.org/a.pdf", "http://example.org/b"]  # fmt: skip
        kept = driver.execute_script("return arguments[0].map((u) => webLink(u));", given)
    assert kept == ["", "", "", "", "", "", "", "https://example.org/a.pdf", "http://example.org/b"]
