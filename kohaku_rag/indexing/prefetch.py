"""Fetching every document metadata.csv lists by URL before indexing: a few at a time.

A 2026-size corpus (122 PDFs listed by version-pinned arXiv URLs) is downloaded by
`kohaku index` in one step: `workers` downloads at once (each with `indexing.download`'s
size cap, deadline, content and host checks, and the URL as written, so `.../2405.01814v2`
stays version 2), one progress line per finished document (listeners see a bar), and a
summary of what failed and why. It resumes by document: a downloaded file sits in the lake's
sources folder, which the corpus scan counts as present, so a re-run fetches only what is
still missing (a download interrupted mid-body leaves nothing, and is fetched whole again).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from kohaku_rag.errors import DocumentError
from kohaku_rag.indexing.corpus import DocumentMeta, fetch_document
from kohaku_rag.indexing.download import DownloadPolicy
from kohaku_rag.progress import Ticker

__all__ = ["PrefetchReport", "prefetch"]


@dataclass(frozen=True)
class PrefetchReport:
    fetched: dict[str, Path] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)  # doc id -> why

    def summary(self) -> list[str]:
        """ "downloaded 3 of 5; 2 failed:" then one line per reason with the documents it hit."""
        total = len(self.fetched) + len(self.failed)
        lines = [f"downloaded {len(self.fetched)} of {total} listed documents"]
        if self.failed:
            by_reason: dict[str, list[str]] = {}
            for doc_id, why in sorted(self.failed.items()):
                by_reason.setdefault(_reason(doc_id, why), []).append(doc_id)
            lines[0] += f"; {len(self.failed)} failed:"
            for why, ids in sorted(by_reason.items(), key=lambda kv: (-len(kv[1]), kv[0])):
                lines.append(f"  {len(ids)} × {why}: {', '.join(ids)}")
        return lines


def prefetch(
    missing: Mapping[str, DocumentMeta],
    dest_dir: Path,
    policy: DownloadPolicy,
    *,
    workers: int = 4,
    progress: Callable[[str], None] = print,
) -> PrefetchReport:
    """Download every document of `missing` (listed with a URL, absent locally) into
    `dest_dir`, `workers` at a time; failures are collected, never raised."""
    if workers < 1:
        raise ValueError(f"download_concurrency must be at least 1, got {workers}")
    report = PrefetchReport()
    if not missing:
        return report
    ticker = Ticker("downloaded", len(missing), progress)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kohaku-download") as pool:
        futures = {
            pool.submit(fetch_document, meta, dest_dir, policy=policy): doc_id for doc_id, meta in missing.items()
        }
        for future in as_completed(futures):
            doc_id = futures[future]
            try:
                path = future.result()
            except DocumentError as exc:
                report.failed[doc_id] = exc.reason
                ticker.tick(f"FAILED {doc_id}: {exc.reason}")
            except (OSError, ValueError) as exc:  # a full disk, an id that cannot be a file name
                report.failed[doc_id] = f"{type(exc).__name__}: {exc}"
                ticker.tick(f"FAILED {doc_id}: {exc}")
            else:
                report.fetched[doc_id] = path
                ticker.tick(f"{doc_id} ({path.stat().st_size:,} bytes)")
    return report


def _reason(doc_id: str, why: str) -> str:
    """The reason without the document's id, so the same failure groups across documents."""
    text = why.replace(f"download of {doc_id} ", "").replace(doc_id, "<id>")
    return text.split("; without network access", 1)[0]
