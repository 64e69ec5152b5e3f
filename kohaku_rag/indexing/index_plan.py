"""The plan of a `kohaku index` run: which documents are (re)built, unchanged, removed or
fetched, from the corpus scan and what the lake stores.

A document is rebuilt when its index rows are missing, stale or unreadable, and also when
one of its intermediate tables (source, tree, captions, vectors) is cut short: its step
needs that table the next time the document changes, and an ordinary run puts it right
(its readable steps are reused, and identical index rows re-assemble nothing).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kohaku_rag.indexing.corpus import CorpusScan
from kohaku_rag.indexing.failures import held_failure
from kohaku_rag.indexing.index_config import IndexConfig
from kohaku_rag.indexing.steps import (
    CAPTIONS,
    INDEX_ROWS,
    LEAF_EMBEDDINGS,
    NODE_EMBEDDINGS,
    SOURCES,
    TREES,
    embeddings_version,
    repaired_of,
    stored_version,
)
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import unreadable_reason

__all__ = ["IndexPlan", "plan_index"]

# The tables a document's rebuild reads back, checked by their Parquet tail (4 bytes each).
INTERMEDIATE = (SOURCES, TREES, CAPTIONS, LEAF_EMBEDDINGS, NODE_EMBEDDINGS)
_PARQUET_MAGIC = b"PAR1"


@dataclass(frozen=True)
class IndexPlan:
    build: list[str]  # new or changed documents (their per-document chain runs)
    unchanged: list[str]
    remove: list[str]  # registered or stored documents that left the corpus
    fetch: list[str] = field(default_factory=list)  # listed by URL, not on disk, not indexed yet
    # Changed documents whose very version failed before: not retried (doc id → reason).
    held: dict[str, str] = field(default_factory=dict)
    # Documents rebuilt because a stored table of theirs can't be read (doc id → file: why).
    unreadable: dict[str, str] = field(default_factory=dict)


def plan_index(
    scan: CorpusScan, lake: Lake, cfg: IndexConfig, known: Iterable[str] = (), *, retry_failed: bool = False
) -> IndexPlan:
    build: list[str] = []
    unchanged: list[str] = []
    held: dict[str, str] = {}
    unreadable: dict[str, str] = {}
    for doc_id, source in scan.documents.items():
        want = embeddings_version(source.content_hash, cfg, repaired_of(lake, doc_id, cfg))
        have = stored_version(lake, INDEX_ROWS, doc_id)
        if have == want and (cut := cut_intermediate(lake, doc_id)) is not None:
            unreadable[doc_id] = cut
            build.append(doc_id)
        elif have == want:
            unchanged.append(doc_id)
        elif have is None and (why := unreadable_reason(lake.table(INDEX_ROWS, doc_id))) is not None:
            # Unreadable is missing: rebuilt whatever failed before (its input did not fail).
            unreadable[doc_id] = f"{lake.table(INDEX_ROWS, doc_id)}: {why}"
            build.append(doc_id)
        elif not retry_failed and (failure := held_failure(lake, doc_id, want)) is not None:
            held[doc_id] = failure.reason
        else:
            build.append(doc_id)
    # A document listed by URL but not fetched yet stays: its source step retries the download.
    present = set(scan.documents) | set(scan.missing)
    stale = (set(known) | set(lake.partitions(INDEX_ROWS)) | set(lake.partitions(SOURCES))) - present
    fetch = [d for d in scan.missing if stored_version(lake, INDEX_ROWS, d) is None]
    return IndexPlan(
        build=sorted(build),
        unchanged=sorted(unchanged),
        remove=sorted(stale),
        fetch=sorted(fetch),
        held=held,
        unreadable=unreadable,
    )


def cut_intermediate(lake: Lake, doc_id: str) -> str | None:
    """ "<file>: why" for the first intermediate table of a document that is cut short or
    overwritten at its end (None: all end as Parquet files do). Reads 4 bytes per table: a
    file cut anywhere loses its footer, and this runs for every document on every run."""
    for asset in INTERMEDIATE:
        path = lake.table(asset, doc_id)
        why = _tail_problem(path)
        if why is not None:
            return f"{path}: {unreadable_reason(path) or why}"
    return None


def _tail_problem(path: Path) -> str | None:
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            if size < 12:
                return "too short to be a Parquet file"
            f.seek(size - 4)
            return None if f.read(4) == _PARQUET_MAGIC else "does not end as a Parquet file"
    except FileNotFoundError:
        return None  # absent is not damage: a step that needs it computes it
