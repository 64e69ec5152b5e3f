"""Remembered document failures: a document that failed is not retried until it could succeed.

A failure is recorded in `<lake>/failures/<doc>.json` under the document's version (content
hash + index settings + step code versions, `steps.embeddings_version`). Planning skips a
document whose recorded failure matches its current version, so one corrupt file is not
re-parsed by every `kohaku index` or every sensor tick, and cannot hold back the rest. It
is tried again when its content, the settings or the code change, or when asked
(`kohaku index --retry-failed`, a materialization from the UI). A success clears the record.

Only the document's own faults are remembered. A model backend that is down, a failed
download or a full disk says nothing about the document, so those are retried next run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from kohaku_rag.errors import BackendError
from kohaku_rag.indexing.corpus import SourceDocument, find_document
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import check_key, write_bytes_atomic


@dataclass(frozen=True)
class Failure:
    doc_id: str
    version: str  # the document version that failed
    reason: str  # one line: the file and what is wrong with it
    at: str  # ISO time


def failure_path(lake: Lake, doc_id: str) -> Path:
    return lake.root / "failures" / f"{check_key(doc_id)}.json"


def record_failure(lake: Lake, doc_id: str, version: str, reason: str) -> None:
    failure = Failure(doc_id, version, reason, datetime.now(UTC).isoformat(timespec="seconds"))
    write_bytes_atomic(failure_path(lake, doc_id), (json.dumps(asdict(failure), indent=2) + "\n").encode())


def recorded_failure(lake: Lake, doc_id: str) -> Failure | None:
    """The remembered failure of a document; a damaged record counts as none (retry)."""
    path = failure_path(lake, doc_id)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Failure(str(data["doc_id"]), str(data["version"]), str(data["reason"]), str(data["at"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def clear_failure(lake: Lake, doc_id: str) -> None:
    failure_path(lake, doc_id).unlink(missing_ok=True)


def held_failure(lake: Lake, doc_id: str, version: str) -> Failure | None:
    """The recorded failure if it is about this very version of the document."""
    failure = recorded_failure(lake, doc_id)
    return failure if failure is not None and failure.version == version else None


def is_document_fault(exc: BaseException) -> bool:
    """Whether a failure is the document's own (worth remembering) or the environment's
    (a backend, the network, the disk: retried next run)."""
    return isinstance(exc, Exception) and not isinstance(exc, BackendError | OSError)


def one_line(exc: BaseException) -> str:
    """The reason of a failure as one line (DocumentError already names the file)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 500 else text[:497] + "..."


@contextmanager
def remembering_failure(lake: Lake, corpus: Path, doc_id: str, version_of: Callable[[str], str]) -> Iterator[None]:
    """Run one step of a document; if it fails by the document's fault, record the failure
    under the version of the document's current file (`version_of(content_hash)`, which is
    `steps.embeddings_version` with the index settings), then re-raise."""
    try:
        yield
    except Exception as exc:
        if is_document_fault(exc):
            remember(lake, corpus, doc_id, version_of, one_line(exc))
        raise


def remember(lake: Lake, corpus: Path, doc_id: str, version_of: Callable[[str], str], reason: str) -> None:
    try:
        # Only the content hash is read here; whether a link may be indexed is decided elsewhere.
        found = find_document(corpus, doc_id, lake.sources_dir, follow_links=True)
    except OSError:
        return  # the file went away meanwhile: the next scan sees that
    # A document only listed by URL has no content yet: its download is retried.
    if isinstance(found, SourceDocument):
        record_failure(lake, doc_id, version_of(found.content_hash), reason)
