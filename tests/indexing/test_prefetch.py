"""`kohaku index` fetching a WattBot-2026-style metadata.csv's documents: a few at a time,
version pins kept through redirects, a failure summary, resumed by document — against a real
HTTP server on 127.0.0.1 serving real (PyMuPDF-made) PDFs under arXiv-like paths."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pymupdf
import pytest

from kohaku_assets.cli import main as cli_main
from kohaku_rag.indexing.corpus import read_metadata
from kohaku_rag.indexing.download import DownloadPolicy
from kohaku_rag.indexing.prefetch import prefetch


def _pdf(text: str) -> bytes:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), text, fontsize=11)
    data = doc.tobytes()
    doc.close()
    return data


V2 = _pdf("Disaggregated decoding, version two. The attention workers drew 300 W.")
V3 = _pdf("Disaggregated decoding, version three. The attention workers drew 250 W.")
RESNET = _pdf("Residual networks. Training took 3.5 days on 8 GPUs.")
REPORT = _pdf("Sustainability report. The company used 5.4 million liters of water.")


class ArxivLike(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    lock = threading.Lock()
    inflight = 0
    most_inflight = 0
    requests: list[str] = []

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        cls = type(self)
        with cls.lock:
            cls.requests.append(self.path)
            cls.inflight += 1
            cls.most_inflight = max(cls.most_inflight, cls.inflight)
        try:
            time.sleep(0.15)  # long enough for downloads to overlap
            self._route(self.path)
        finally:
            with cls.lock:
                cls.inflight -= 1

    def _route(self, path: str) -> None:
        pdf = {"Content-Type": "application/pdf"}
        if path == "/pdf/2405.01814v2":  # arXiv serves a pinned version as asked
            self._send(200, V2, pdf)
        elif path == "/pdf/2405.01814":  # unpinned: the latest version
            self._send(302, headers={"Location": "/pdf/2405.01814v3"})
        elif path == "/pdf/2405.01814v3":
            self._send(200, V3, pdf)
        elif path == "/abs/1512.03385v1":  # an abstract page URL redirects to the pinned PDF
            self._send(301, headers={"Location": "/pdf/1512.03385v1"})
        elif path == "/pdf/1512.03385v1":
            self._send(200, RESNET, pdf)
        elif path == "/reports/amazon2023.pdf":
            self._send(200, REPORT, pdf)
        elif path == "/pdf/2401.99999v1":
            self._send(404, b"not found", {"Content-Type": "text/plain"})
        elif path == "/pdf/2402.00001v1":  # a consent wall instead of the PDF
            self._send(200, b"<!doctype html><html>consent</html>", {"Content-Type": "text/html"})
        else:
            self._send(404)


@pytest.fixture
def server() -> Iterator[str]:
    ArxivLike.requests, ArxivLike.inflight, ArxivLike.most_inflight = [], 0, 0
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), ArxivLike)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _metadata(corpus: Path, base: str) -> Path:
    """A metadata.csv as the 2026 one is written: UTF-8 with a BOM, CRLF, the 2026 columns."""
    corpus.mkdir(parents=True, exist_ok=True)
    rows = [
        "id,type,title,year,citation,url,peer_reviewed,venue_evidence,venue",
        f'chen2024,paper,Model-Attention Disaggregation,2024,"Chen, S. (2024). arXiv.",{base}/pdf/2405.01814v2,'
        "preprint,on arXiv with no journal_ref,",
        f"he2016,paper,Deep Residual Learning,2016,He et al. (2016).,{base}/abs/1512.03385v1,yes,CVPR 2016,CVPR",
        f"amazon2023,report,2023 Amazon Sustainability Report,2023,Amazon Staff. (2023).,"
        f"{base}/reports/amazon2023.pdf,no,official/industry report — not peer reviewed by design,",
        f"gone2024,paper,A Withdrawn Paper,2024,X. (2024).,{base}/pdf/2401.99999v1,preprint,,",
        f"wall2024,paper,Behind A Wall,2024,Y. (2024).,{base}/pdf/2402.00001v1,preprint,,",
    ]
    path = corpus / "metadata.csv"
    path.write_bytes(("\ufeff" + "\r\n".join(rows) + "\r\n").encode("utf-8"))
    return path


def test_the_2026_metadata_columns_load(tmp_path: Path) -> None:
    _metadata(tmp_path / "corpus", "https://arxiv.org")
    meta = read_metadata(tmp_path / "corpus")
    assert list(meta) == ["chen2024", "he2016", "amazon2023", "gone2024", "wall2024"]
    chen = meta["chen2024"]
    assert chen.url == "https://arxiv.org/pdf/2405.01814v2" and chen.title == "Model-Attention Disaggregation"
    assert chen.extra["type"] == "paper" and chen.extra["peer_reviewed"] == "preprint"
    assert meta["amazon2023"].extra["venue_evidence"] == "official/industry report — not peer reviewed by design"
    assert meta["he2016"].extra["venue"] == "CVPR"


def test_prefetch_is_bounded_keeps_pins_and_summarises_failures(server: str, tmp_path: Path) -> None:
    meta = read_metadata(_metadata(tmp_path / "corpus", server).parent)
    lines: list[str] = []
    policy = DownloadPolicy(allow_private_hosts=True, timeout=10.0)
    report = prefetch(meta, tmp_path / "sources", policy, workers=2, progress=lines.append)
    assert sorted(report.fetched) == ["amazon2023", "chen2024", "he2016"]
    assert report.fetched["chen2024"].read_bytes() == V2  # version 2 as pinned, not the latest
    assert report.fetched["he2016"].read_bytes() == RESNET  # through the /abs/ redirect
    assert ArxivLike.most_inflight == 2  # never more than `workers` at once
    assert "/pdf/2405.01814" not in ArxivLike.requests
    assert sorted(report.failed) == ["gone2024", "wall2024"]
    assert len([line for line in lines if line.startswith("downloaded ")]) == 5  # one line per document
    summary = report.summary()
    assert summary[0] == "downloaded 3 of 5 listed documents; 2 failed:"
    assert "  1 × failed with HTTP 404: gone2024" in summary
    assert any(line.startswith("  1 × refused: it is an HTML page") and line.endswith(": wall2024") for line in summary)
    assert not list((tmp_path / "sources").glob(".*download"))  # nothing partial left


def test_kohaku_index_downloads_indexes_and_resumes(
    server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus, lake = tmp_path / "corpus", tmp_path / "lake"
    _metadata(corpus, server)
    config = tmp_path / "index.toml"
    config.write_text("download_allow_private_hosts = true\ndownload_concurrency = 3\ndownload_timeout = 10.0\n")
    monkeypatch.setenv("DAGSTER_HOME", str(lake / ".dagster"))
    args = ["index", "--lake", str(lake), "--corpus", str(corpus), "--index-config", str(config)]
    assert cli_main(args) == 1  # two documents failed
    out = capsys.readouterr().out
    assert "downloaded 3 of 5 listed documents; 2 failed:" in out
    assert "3 documents" in out and "FAILED gone2024: download of gone2024 failed with HTTP 404" in out
    assert ArxivLike.most_inflight <= 3
    fetched = sorted(p.name for p in (lake / "sources").iterdir() if not p.name.startswith("."))
    assert [n for n in fetched if n.endswith(".pdf")] == ["amazon2023.pdf", "chen2024.pdf", "he2016.pdf"]

    # Resumed: a second run asks the server only for the two that failed.
    ArxivLike.requests.clear()
    assert cli_main(args) == 1
    assert sorted(ArxivLike.requests) == ["/pdf/2401.99999v1", "/pdf/2402.00001v1"]
    assert "downloaded 0 of 2 listed documents; 2 failed:" in capsys.readouterr().out
    assert cli_main(["search", "attention workers drew", "--lake", str(lake), "--corpus", str(corpus), "--json"]) == 0
    assert '"doc_id": "chen2024"' in capsys.readouterr().out
