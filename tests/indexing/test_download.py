"""Downloads from metadata.csv URLs: size cap, total deadline, content check, host policy,
nothing partial or refused left in the lake — against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from kohaku_rag.errors import DocumentError
from kohaku_rag.indexing.corpus import DocumentMeta, fetch_document, resolve_source
from kohaku_rag.indexing.download import DownloadPolicy
from kohaku_rag.indexing.index_config import IndexConfig

PDF = b"%PDF-1.4\n" + b"0" * 2000 + b"\n%%EOF\n"
# The tests' server is on 127.0.0.1, which the default policy refuses (an intranet address).
LOCAL = DownloadPolicy(allow_private_hosts=True, timeout=5.0)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, body: bytes, content_type: str, length: bool = True, status: int = 200) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if length:
            self.send_header("Content-Length", str(len(body)))
        else:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        port = self.server.server_address[1]
        path = self.path.split("?")[0]
        if path == "/doc.pdf":
            self._send(PDF, "application/pdf")
        elif path == "/notes":
            self._send(b"Plain notes\n\nThe facility reported a PUE of 1.12.\n", "text/plain; charset=utf-8")
        elif path == "/big.pdf":  # declares its size
            self._send(PDF + b"x" * 300_000, "application/pdf")
        elif path == "/endless.pdf":  # no Content-Length: counted while reading
            self.send_response(200)
            self.send_header("Content-Type", "application/pdf")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                self.wfile.write(PDF)
                for _ in range(200):
                    self.wfile.write(b"y" * 65536)
            except (BrokenPipeError, ConnectionResetError):
                pass
        elif path == "/trickle.pdf":  # one byte every 0.3 s: each read is quick, the whole is not
            self.send_response(200)
            self.send_header("Content-Type", "application/pdf")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for byte in PDF:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.3)
            except (BrokenPipeError, ConnectionResetError):
                pass
        elif path == "/login":
            self._send(b"<!DOCTYPE html><html><body>Sign in</body></html>", "text/html")
        elif path == "/fake.pdf":  # says PDF, is an HTML page
            self._send(b"  <html><head><title>Paywall</title></head></html>", "application/pdf")
        elif path == "/notpdf.pdf":
            self._send(b"GIF89a....", "application/pdf")
        elif path == "/binary":
            self._send(b"\x00\x01\x02\xff" * 100, "application/octet-stream")
        elif path == "/same-host":
            self.send_response(302)
            self.send_header("Location", "/doc.pdf")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/other-host":  # 127.0.0.1 -> localhost: another host name
            self.send_response(302)
            self.send_header("Location", f"http://localhost:{port}/doc.pdf")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._send(b"not found", "text/plain", status=404)


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hung up on a refused body


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    server = QuietServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def fetch(base: str, path: str, lake: Path, policy: DownloadPolicy = LOCAL) -> Path:
    return fetch_document(DocumentMeta("doc", url=f"{base}{path}"), lake, policy=policy)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_a_pdf_and_a_text_file_are_streamed_into_place(base: str, tmp_path: Path) -> None:
    assert fetch(base, "/doc.pdf", tmp_path).read_bytes() == PDF
    assert fetch(base, "/notes", tmp_path).name == "doc.txt"
    assert fetch(base, "/same-host", tmp_path).name == "doc.pdf"  # a redirect on the same host
    assert leftovers(tmp_path) == ["doc.pdf", "doc.txt"]  # no temporary file left


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/big.pdf", r"over download_max_bytes = 100,000"),
        ("/endless.pdf", r"more than [\d,]+ bytes, over download_max_bytes = 100,000"),
        ("/login", r"HTML page \(text/html\)"),
        ("/fake.pdf", r"HTML page"),
        ("/notpdf.pdf", r"should be a PDF .* does not start with %PDF"),
        ("/binary", r"neither a PDF nor UTF-8 text"),
        ("/other-host", r"redirected to another host .*download_allow_cross_host_redirects"),
    ],
)
def test_refused_downloads_leave_nothing_in_the_lake(base: str, tmp_path: Path, path: str, reason: str) -> None:
    policy = DownloadPolicy(max_bytes=100_000, timeout=5.0, allow_private_hosts=True)
    with pytest.raises(DocumentError, match=rf"download of doc refused: .*{reason}"):
        fetch(base, path, tmp_path, policy)
    assert leftovers(tmp_path) == []


def test_a_trickling_server_is_cut_at_the_total_deadline(base: str, tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(DocumentError, match=r"not finished within download_timeout = 1 s"):
        fetch(base, "/trickle.pdf", tmp_path, DownloadPolicy(timeout=1.0, allow_private_hosts=True))
    assert time.monotonic() - started < 3.0 and leftovers(tmp_path) == []


def test_private_hosts_and_cross_host_redirects_are_refused_unless_allowed(base: str, tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match=r"private, loopback or reserved address \(127\.0\.0\.1\).*allow_private"):
        fetch(base, "/doc.pdf", tmp_path, DownloadPolicy())
    with pytest.raises(DocumentError, match="private, loopback"):  # by name too
        fetch(base.replace("127.0.0.1", "localhost"), "/doc.pdf", tmp_path, DownloadPolicy())
    assert leftovers(tmp_path) == []
    allowed = DownloadPolicy(allow_private_hosts=True, allow_cross_host_redirects=True)
    assert fetch(base, "/other-host", tmp_path, allowed).read_bytes() == PDF


def test_the_index_config_sets_the_policy_and_errors_hide_url_credentials(base: str, tmp_path: Path) -> None:
    cfg = IndexConfig(download_max_bytes=10, download_timeout=3.0, download_allow_private_hosts=True)
    assert cfg.download_policy == DownloadPolicy(10, 3.0, True, False)
    # New keys leave every stored version hash as it was.
    plain = IndexConfig()
    assert (cfg.parse_hash, cfg.caption_hash, cfg.embed_hash) == (
        plain.parse_hash,
        plain.caption_hash,
        plain.embed_hash,
    )
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    secret = "tok-51b2c3d4e5f6a7b8c9d0"
    (corpus / "metadata.csv").write_text(f"id,title,url\ndoc,Doc,{base}/big.pdf?api_key={secret}\n")
    with pytest.raises(DocumentError) as info:
        resolve_source(corpus, tmp_path / "sources", "doc", cfg.download_policy)
    assert "over download_max_bytes = 10" in str(info.value) and secret not in str(info.value)
    assert leftovers(tmp_path / "sources") == []
