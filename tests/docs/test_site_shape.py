"""The built documentation site reads like docs: no wall of a code block, no
wall of a paragraph, the OpenAPI description linked rather than pasted in, and no page
clipping a command sideways. Builds the real site with mkdocs (~15 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAX_CODE = 20_000  # characters in one code block
MAX_PARAGRAPH = 1_200  # characters in one paragraph


class Blocks(HTMLParser):
    """The text of every <pre> and <p> of a page (a <p> inside another is counted once, alone)."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[tuple[str, list[str]]] = []
        self.found: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("pre", "p"):
            self.open.append((tag, []))

    def handle_endtag(self, tag: str) -> None:
        if tag in ("pre", "p") and self.open and self.open[-1][0] == tag:
            kind, parts = self.open.pop()
            self.found.append((kind, "".join(parts)))

    def handle_data(self, data: str) -> None:
        if self.open:
            self.open[-1][1].append(data)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true", "PYTHONPATH": str(REPO)}
    mkdocs = [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)]
    done = subprocess.run(mkdocs, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _blocks(site: Path) -> list[tuple[str, str, str]]:
    out = []
    for page in sorted(site.rglob("*.html")):
        parser = Blocks()
        parser.feed(page.read_text(encoding="utf-8"))
        out += [(str(page.relative_to(site)), kind, text) for kind, text in parser.found]
    return out


def test_no_code_block_or_paragraph_is_a_wall(site: Path) -> None:
    # No page carries a wall: a code block of tens of thousands of characters (an
    # openapi.json, a module list) or a paragraph of well over a thousand.
    blocks = _blocks(site)
    walls = [(page, kind, len(text), text[:60]) for page, kind, text in blocks
             if len(text) > (MAX_CODE if kind == "pre" else MAX_PARAGRAPH)]  # fmt: skip
    assert not walls, walls


def test_the_http_reference_links_the_description_it_used_to_paste(site: Path) -> None:
    html = (site / "reference" / "http-api" / "index.html").read_text(encoding="utf-8")
    assert 'href="../openapi.json"' in html
    served = json.loads((site / "reference" / "openapi.json").read_text(encoding="utf-8"))
    assert served["openapi"].startswith("3.") and "/api/ask" in served["paths"]


def test_the_benchmarks_page_cuts_no_command_off(site: Path) -> None:
    # Every command of the benchmarks page is readable whole: no block of dozens of commands,
    # no line cut off at the page's edge.
    for page, kind, text in _blocks(site):
        if page.startswith("benchmarks/index") and kind == "pre":
            assert max(map(len, text.splitlines())) <= 110, text


def test_the_tutorial_states_no_time_a_bench_run_did_not_measure() -> None:
    # The tutorial states only timings a bench run measured, and no stage the default lacks.
    text = (REPO / "docs" / "tutorial.md").read_text(encoding="utf-8")
    assert "20-40 s" not in text and "(planning," not in text
    assert "bench/answering/time_to_answer.py`, 2026-11-26" in text


def test_no_page_clips_a_table_or_scrolls_code_sideways(site: Path) -> None:
    """In a real browser at 1280 px, no table is wider than the column it sits in and no code
    block scrolls sideways: before, the config reference's tables were clipped, and code
    lines scrolled sideways by up to 814 px."""
    import functools
    import http.server
    import threading

    from tests.support.browser import chromium, chromium_missing

    if chromium_missing() is not None:
        pytest.skip(chromium_missing() or "")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    measure = """
        const over = (el) => el.scrollWidth - el.clientWidth;
        const out = [];
        for (const pre of document.querySelectorAll('.md-typeset pre > code')) {
          if (over(pre) > 2) out.push(['code', over(pre), pre.textContent.slice(0, 60)]);
        }
        for (const wrap of document.querySelectorAll('.md-typeset__table, .md-typeset table')) {
          if (over(wrap) > 2) out.push(['table', over(wrap), wrap.textContent.slice(0, 60)]);
        }
        return out;
    """
    pages = sorted(p.relative_to(site).parent.as_posix() for p in site.rglob("index.html"))
    found = {}
    try:
        with chromium() as driver:
            for page in pages:
                driver.get(f"{url}/{'' if page == '.' else page + '/'}")
                wide = driver.execute_script(measure)
                if wide:
                    found[page] = wide[:3]
    finally:
        server.shutdown()
    assert found == {}
