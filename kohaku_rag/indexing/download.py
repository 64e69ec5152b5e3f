"""Downloading a document listed in metadata.csv by URL, safely.

* Streamed to a temporary file next to its target, so a large body is never held in memory,
  and renamed into place only after every check passed: a refused or interrupted download
  leaves nothing in the lake.
* A size cap (`max_bytes`, checked against Content-Length and while reading) and a total
  deadline (`timeout`, for the whole download however slowly the server trickles bytes).
* A content check: a PDF must start with %PDF; an HTML page (a login wall, an error page, a
  landing page) is refused with a message; other bodies must be text.
* Private, loopback, link-local and reserved addresses are refused unless `allow_private_hosts`
  (for an intranet), and redirects to another host unless `allow_cross_host_redirects`.
* Credentials in the URL (user:key@, ?api-key=) never show in a message.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import httpx

from kohaku_rag.errors import DocumentError
from kohaku_rag.http_retry import safe_url

MAX_REDIRECTS = 5
CHUNK = 1 << 16
MB = 1_000_000


@dataclass(frozen=True)
class DownloadPolicy:
    max_bytes: int = 50 * MB
    timeout: float = 120.0  # seconds for the whole download
    allow_private_hosts: bool = False
    allow_cross_host_redirects: bool = False

    def __post_init__(self) -> None:
        if self.max_bytes < 1 or not self.timeout > 0:
            raise ValueError("download_max_bytes must be >= 1 and download_timeout > 0")


class _Refused(Exception):
    """A download stopped by a check; the message says which and what to do."""


def download(url: str, target_stem: Path, policy: DownloadPolicy, doc_id: str) -> Path:
    """Fetch `url` into `<target_stem>.pdf` or `.txt` (by content); DocumentError otherwise."""
    shown = safe_url(url)
    folder = target_stem.parent
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target_stem.name}.", suffix=".download", dir=folder)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            content_type, final_url = _stream(url, out, policy)
        suffix = _check_content(tmp, content_type, final_url, policy)
        target = target_stem.with_name(f"{target_stem.name}{suffix}")
        os.replace(tmp, target)
        return target
    except _Refused as exc:
        raise DocumentError(shown, f"download of {doc_id} refused: {exc}") from None
    except httpx.HTTPStatusError as exc:
        raise DocumentError(shown, f"download of {doc_id} failed with HTTP {exc.response.status_code}") from None
    except httpx.HTTPError as exc:
        reason = str(exc).replace(url, shown)
        raise DocumentError(
            shown,
            f"download of {doc_id} failed ({type(exc).__name__}: {reason}); without network access, "
            f"put the file in the corpus folder as {doc_id}.pdf",
        ) from None
    finally:
        tmp.unlink(missing_ok=True)


def _stream(url: str, out: BinaryIO, policy: DownloadPolicy) -> tuple[str, str]:
    """Write the body of `url` (after allowed redirects) to `out`; (content type, final URL)."""
    deadline = time.monotonic() + policy.timeout
    # One read never waits longer than this, so the deadline is overshot by at most one read.
    step = min(policy.timeout, 10.0)
    timeout = httpx.Timeout(step, connect=step)
    first_host = _host_of(url)
    with httpx.Client(follow_redirects=False, timeout=timeout) as client:
        for _ in range(MAX_REDIRECTS + 1):
            _check_host(url, policy)
            with client.stream("GET", url) as response:
                if response.is_redirect:
                    location = response.headers.get("location", "")
                    url = urllib.parse.urljoin(url, location)
                    if _host_of(url) != first_host and not policy.allow_cross_host_redirects:
                        raise _Refused(
                            f"redirected to another host ({safe_url(url)}); set "
                            "download_allow_cross_host_redirects = true in the index config to follow it"
                        )
                    continue
                response.raise_for_status()
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > policy.max_bytes:
                    raise _Refused(_too_big(int(declared), policy))
                size = 0
                for chunk in response.iter_bytes():  # as received (a chunk size would wait to fill it)
                    size += len(chunk)
                    if size > policy.max_bytes:
                        raise _Refused(_too_big(size, policy, more=True))
                    out.write(chunk)
                    if time.monotonic() > deadline:
                        raise _Refused(
                            f"not finished within download_timeout = {policy.timeout:g} s "
                            f"({size} bytes received); raise it in the index config for a slow server"
                        )
                return response.headers.get("content-type", ""), url
    raise _Refused(f"more than {MAX_REDIRECTS} redirects")


def _too_big(size: int, policy: DownloadPolicy, more: bool = False) -> str:
    return (
        f"the body is {'more than ' if more else ''}{size:,} bytes, over download_max_bytes = "
        f"{policy.max_bytes:,}; raise it in the index config, or put the file in the corpus folder"
    )


def _host_of(url: str) -> str:
    return (urllib.parse.urlsplit(url).hostname or "").lower()


def _check_host(url: str, policy: DownloadPolicy) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _Refused(f"{safe_url(url)} is not an http(s) URL")
    if policy.allow_private_hosts:
        return
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
    except OSError:
        return  # unresolvable: the request itself fails with a connection error
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if not address.is_global or address.is_multicast:
            raise _Refused(
                f"{parts.hostname} is a private, loopback or reserved address ({address}); set "
                "download_allow_private_hosts = true in the index config to download from an intranet"
            )


_HTML_STARTS = (b"<!doctype html", b"<html", b"<head", b"<body", b"<?xml", b"<!--")


def _check_content(path: Path, content_type: str, url: str, policy: DownloadPolicy) -> str:
    """ ".pdf" or ".txt" for what the file holds; _Refused for anything else."""
    with path.open("rb") as fh:
        head = fh.read(4096)
    kind = content_type.split(";", 1)[0].strip().lower()
    if head.startswith(b"%PDF"):
        return ".pdf"
    start = head.lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    if "html" in kind or start.startswith(_HTML_STARTS):
        return _refuse_html(kind)
    said_pdf = "pdf" in kind or urllib.parse.urlsplit(url).path.lower().endswith(".pdf")
    if said_pdf:
        raise _Refused(f"it should be a PDF ({kind or 'by its URL'}) but does not start with %PDF: {head[:40]!r}")
    if not head:
        raise _Refused("the body is empty")
    if b"\0" in head or not _is_text(path):
        raise _Refused(f"it is neither a PDF nor UTF-8 text (content type {kind or 'unknown'})")
    return ".txt"


def _refuse_html(kind: str) -> str:
    raise _Refused(
        f"it is an HTML page ({kind or 'by its content'}), not a document: most often a login, "
        "consent or error page; give the URL of the PDF itself, or put the file in the corpus folder"
    )


def _is_text(path: Path) -> bool:
    try:
        with path.open("r", encoding="utf-8") as fh:
            while fh.read(CHUNK):
                pass
        return True
    except UnicodeDecodeError:
        return False
