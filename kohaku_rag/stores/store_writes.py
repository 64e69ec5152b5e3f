"""Writing one document's rows into a vector store: its nodes, vectors (and sign codes
for the "binary" search) and `documents` row, or deleting them. Called inside the store's
one transaction per change set (VectorStore.apply_changes)."""

from __future__ import annotations

from datetime import UTC, datetime

import apsw
import numpy as np

from kohaku_rag.document.tree import NodeKind
from kohaku_rag.stores.sign_codes import quantised
from kohaku_rag.stores.store_checks import VectorDigest
from kohaku_rag.stores.store_rows import (
    NODE_COLUMNS,
    VEC_KINDS,
    DocumentUpsert,
    bits_table,
    node_rows,
    vec_table,
    vector_items,
)

__all__ = ["delete_rows", "insert_document"]


def delete_rows(conn: apsw.Connection, doc_id: str, *, binary: bool) -> None:
    """Every row of a document (inside the caller's transaction)."""
    for kind in VEC_KINDS:
        ids = conn.execute("SELECT id FROM nodes WHERE doc_id = ? AND kind = ?", (doc_id, str(kind))).fetchall()
        # Point deletes by rowid: a `WHERE doc_id = ?` on vec0 would scan the whole table.
        conn.executemany(f"DELETE FROM {vec_table(kind)} WHERE id = ?", ids)
        if binary:
            conn.executemany(f"DELETE FROM {bits_table(kind)} WHERE id = ?", ids)
    conn.execute("DELETE FROM node_vectors WHERE doc_id = ?", (doc_id,))
    conn.execute("DELETE FROM nodes WHERE doc_id = ?", (doc_id,))
    conn.execute("DELETE FROM documents WHERE doc_id = ?", (doc_id,))


def insert_document(conn: apsw.Connection, up: DocumentUpsert, dim: int, *, binary: bool) -> str:
    """A document's rows, checked (inside the caller's transaction); returns its vectors' digest."""
    rows = node_rows(up.doc_id, up.nodes)
    try:
        conn.executemany(f"INSERT INTO nodes({NODE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    except apsw.ConstraintError as exc:
        raise ValueError(f"document {up.doc_id!r}: a node id is already used by another document ({exc})") from exc
    ids = dict(conn.execute("SELECT node_id, id FROM nodes WHERE doc_id = ?", (up.doc_id,)))
    kinds = {r[0]: r[3] for r in rows}
    by_kind: dict[str, list[tuple[int, bytes, str]]] = {}
    digest = VectorDigest()
    for node_id, vec in vector_items(up.doc_id, up.vectors, dim):
        if node_id not in ids:
            raise ValueError(f"document {up.doc_id!r}: vector for unknown node {node_id!r}")
        by_kind.setdefault(str(kinds[node_id]), []).append((ids[node_id], vec.tobytes(), up.doc_id))
        digest.add(node_id, vec.tobytes())
    for kind, items in by_kind.items():
        if kind in VEC_KINDS:
            conn.executemany(f"INSERT INTO {vec_table(NodeKind(kind))}(id, embedding, doc_id) VALUES (?, ?, ?)", items)
            if binary:
                conn.executemany(
                    f"INSERT INTO {bits_table(NodeKind(kind))}(id, code, q8, q8_scale) VALUES (?, ?, ?, ?)",
                    [(i, *quantised(np.frombuffer(blob, np.float32))) for i, blob, _d in items],
                )
        else:
            conn.executemany(
                "INSERT INTO node_vectors(id, kind, doc_id, embedding) VALUES (?, ?, ?, ?)",
                [(i, kind, d, blob) for i, blob, d in items],
            )
    conn.execute(
        "INSERT INTO documents(doc_id, version, title, url, n_nodes, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
        (up.doc_id, up.version, up.title, up.url, len(rows), datetime.now(UTC).isoformat()),
    )
    return digest.hexdigest()
