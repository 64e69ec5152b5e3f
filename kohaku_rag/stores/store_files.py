"""A vector store's file as a whole: checked without opening it as a store, its search mode
read, removed with its side files, and a store built beside it swapped in."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import apsw

from kohaku_rag.stores.store_rows import VEC_KINDS, vec_table

# 2: nodes carry their table record (table_record), so a context item needs no parse of
# its text back into a table.
SCHEMA_VERSION = "2"


def remove_store(path: Path) -> None:
    """Delete a store with its WAL/SHM side files (to rebuild it from scratch)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


@dataclass(frozen=True)
class StoreHealth:
    """What a store file holds, checked cheaply (no vector is read).

    `versions`: document id → version (None when the file is absent or unusable as a
    whole, `problem` then says why); `damaged`: documents whose rows disagree with their
    `documents` row (nodes deleted or added behind the store's back), to be re-upserted.
    """

    versions: dict[str, str] | None
    problem: str | None = None
    damaged: tuple[str, ...] = ()


def check_store(path: Path) -> StoreHealth:
    """Open a store file read-only and check its schema version and, per document, that the
    nodes it holds are the `n_nodes` its `documents` row recorded in the same transaction."""
    path = Path(path)
    if not path.exists():
        return StoreHealth(None, "no vector index file")
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error as exc:
        return StoreHealth(None, f"unreadable ({apsw_reason(exc)})")
    try:
        conn.set_busy_timeout(60_000)
        meta = {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta").fetchall()}
        if meta.get("schema_version") != SCHEMA_VERSION:
            return StoreHealth(
                None, f"schema version {meta.get('schema_version')!r}, this code needs {SCHEMA_VERSION!r}"
            )
        docs = conn.execute("SELECT doc_id, version, n_nodes FROM documents").fetchall()
        counts = {
            str(d): int(cast(int, n)) for d, n in conn.execute("SELECT doc_id, count(*) FROM nodes GROUP BY doc_id")
        }
    except apsw.Error as exc:
        return StoreHealth(None, f"unreadable ({apsw_reason(exc)})")
    finally:
        conn.close()
    versions = {str(d): str(v) for d, v, _n in docs}
    damaged = sorted({str(d) for d, _v, n in docs if counts.get(str(d), 0) != n} | (set(counts) - set(versions)))
    return StoreHealth(versions, None, tuple(damaged))


def apsw_reason(exc: apsw.Error) -> str:
    return str(exc).split(":", 1)[-1].strip() or type(exc).__name__


def stored_document_versions(path: Path) -> dict[str, str] | None:
    """document id → version of what a store file holds, read without the embedder (None
    when there is no readable store). The `documents` row is written in the same
    transaction as the document's nodes and vectors, so it is the truth about them."""
    return check_store(path).versions


def create_tables(conn: apsw.Connection, dim: int) -> None:
    """The store's tables (see vectors.py), created where missing."""
    conn.execute(
        """
        CREATE TABLE IF NOT EXISTS documents(
            doc_id TEXT PRIMARY KEY, version TEXT NOT NULL, title TEXT NOT NULL,
            url TEXT NOT NULL, n_nodes INTEGER NOT NULL, updated_at TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS nodes(
            id INTEGER PRIMARY KEY, node_id TEXT NOT NULL UNIQUE, doc_id TEXT NOT NULL,
            parent_id TEXT, kind TEXT NOT NULL, ordinal INTEGER NOT NULL,
            title TEXT NOT NULL, text TEXT NOT NULL, page INTEGER, bbox TEXT,
            attachment TEXT NOT NULL, media_hash TEXT, length INTEGER NOT NULL,
            table_record TEXT);
        CREATE INDEX IF NOT EXISTS nodes_by_doc ON nodes(doc_id);
        CREATE INDEX IF NOT EXISTS nodes_by_parent ON nodes(parent_id, ordinal);
        CREATE TABLE IF NOT EXISTS node_vectors(
            id INTEGER PRIMARY KEY, kind TEXT NOT NULL, doc_id TEXT NOT NULL,
            embedding BLOB NOT NULL);
        CREATE INDEX IF NOT EXISTS node_vectors_by_kind ON node_vectors(kind, doc_id);
        """
    )
    for kind in VEC_KINDS:
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {vec_table(kind)} USING vec0("
            f"id INTEGER PRIMARY KEY, embedding float[{dim}] distance_metric=cosine, "
            "doc_id TEXT)"
        )


def seal_store(path: Path) -> None:
    """Make a built store one self-contained file (rollback journal, no WAL beside it), as
    a published generation must be: its checksum covers all of it, and readers open it
    read-only."""
    conn = apsw.Connection(str(path))
    try:
        conn.set_busy_timeout(60_000)
        conn.execute("PRAGMA journal_mode=DELETE")
    finally:
        conn.close()


def replace_store(built: Path, path: Path) -> None:
    """Swap a store built beside the live one into its place. A reader sees the old file
    or the new, never half of either: it keeps its open old file, the next open gets the new.
    The built store was closed, so its WAL is checkpointed into it; the old store's side
    files are removed first, since a WAL left beside the new file would be replayed into it."""
    for suffix in ("-wal", "-shm"):
        if Path(f"{built}{suffix}").exists():
            raise RuntimeError(f"{built}: still open (its {suffix} file exists); not swapping it in")
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.replace(built, path)


def stored_search_mode(path: Path) -> str | None:
    """The search mode a store file records ("exact" when it records none); None when
    there is no readable store."""
    if not Path(path).exists():
        return None
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return None
    try:
        conn.set_busy_timeout(60_000)
        rows = conn.execute("SELECT value FROM meta WHERE key = 'search'").fetchall()
    except apsw.Error:
        return None
    finally:
        conn.close()
    return str(rows[0][0]) if rows else "exact"
