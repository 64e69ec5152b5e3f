"""The "binary" vector search: sign codes ranked in memory, int8 copies, exact re-scoring.

At 100x the WattBot corpus exact search no longer fits 100 ms, so a store can instead be
searched by `search = "binary"` (recorded in `meta`, chosen by the index config's
`vector_search`): each searchable vector also gets a 1-bit-per-dimension sign code
(`bits_<kind>`, written in the same transaction as the vector), all codes are held in
memory as packed uint64 words (48 bytes per row at 384 dims: 38 MB for 800k rows), a query
ranks every row by Hamming distance with numpy (XOR + popcount, no per-row SQLite cost), the
best candidates (RESCORE_*) are re-ranked with their int8 copies (same table), and
the best k + RESCORE_MARGIN of those get their exact float32 scores from vec0. Exact for
what it returns, approximate in what it may miss: bench/indexing/scale.py measures recall@k against
the exact search in the same run.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import cast

import apsw
import numpy as np

from kohaku_rag.document.tree import NodeKind
from kohaku_rag.stores.store_rows import bits_table, vec_table

# How many Hamming-ranked candidates are re-ranked: RESCORE_FACTOR per requested hit, at
# least RESCORE_MIN, and at least 1/RESCORE_FRACTION of the rows (more rows, more near
# neighbours to tell apart: bench/indexing/scale.py at 100x WattBot, 479k rows, recall@10 vs exact:
# 200 candidates 0.75, 2,000 0.97, 4,000 0.99).
RESCORE_FACTOR = 20
RESCORE_MIN = 200
RESCORE_FRACTION = 200
# ... and how many more than k of the int8-ranked ones get their exact float score.
RESCORE_MARGIN = 8


@dataclass(frozen=True)
class Codes:
    """One kind's sign codes in memory: rowids, each row's document, packed words."""

    ids: np.ndarray  # (n,) int64 rowids
    doc_names: np.ndarray  # (d,) str, sorted
    doc_index: np.ndarray  # (n,) index into doc_names
    words: np.ndarray  # (n, w) uint64 (or uint8 when dim is not a multiple of 64)


def sign_code(vec: np.ndarray) -> bytes:
    """1 bit per dimension: set where the component is positive."""
    return np.packbits(np.asarray(vec) > 0).tobytes()


def quantised(vec: np.ndarray) -> tuple[bytes, bytes, float]:
    """The sign code, and the vector as int8 with its scale (v ~= q8 * scale)."""
    peak = float(np.max(np.abs(vec))) or 1.0
    q8 = np.clip(np.rint(vec * (127.0 / peak)), -127, 127).astype(np.int8)
    return sign_code(vec), q8.tobytes(), peak / 127.0


def as_words(packed: np.ndarray) -> np.ndarray:
    """Packed bytes as uint64 words when they divide evenly (8x fewer XOR/popcount ops)."""
    return packed.view(np.uint64) if packed.shape[1] % 8 == 0 else packed


def sign_words(query: np.ndarray) -> np.ndarray:
    return as_words(np.frombuffer(sign_code(query), dtype=np.uint8).reshape(1, -1))


def create_bits(conn: apsw.Connection, kind: NodeKind) -> None:
    """The kind's codes table, filled from its vectors (switching a store to "binary")."""
    # code: the sign bits; q8 + q8_scale: the vector as int8 (reading floats back out of
    # vec0 costs 150-270 us per row, too slow for a few hundred candidates per query).
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {bits_table(kind)}("
        "id INTEGER PRIMARY KEY, code BLOB NOT NULL, q8 BLOB NOT NULL, q8_scale REAL NOT NULL)"
    )
    rows = conn.execute(f"SELECT id, embedding FROM {vec_table(kind)}")
    conn.executemany(
        f"INSERT INTO {bits_table(kind)}(id, code, q8, q8_scale) VALUES (?, ?, ?, ?)",
        ((i, *quantised(np.frombuffer(v, np.float32))) for i, v in rows),
    )


def load_codes(conn: apsw.Connection, kind: NodeKind) -> Codes:
    """A kind's codes, read into memory (once per opened store)."""
    rows = conn.execute(
        f"SELECT b.id, n.doc_id, b.code FROM {bits_table(kind)} b JOIN nodes n ON n.id = b.id ORDER BY b.id"
    ).fetchall()
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    doc_names, doc_index = np.unique(np.array([r[1] for r in rows], dtype=str), return_inverse=True)
    raw = np.frombuffer(b"".join(cast(bytes, r[2]) for r in rows), dtype=np.uint8)
    return Codes(ids, doc_names, doc_index, as_words(raw.reshape(len(rows), -1)))


def binary_search(
    conn: apsw.Connection, codes: Codes, kind: NodeKind, query: np.ndarray, k: int, doc_ids: Collection[str] | None
) -> list[tuple[str, str, float]]:
    """Hamming ranking of the in-memory sign codes, int8 re-ranking of the best
    candidates, exact cosine of the best k + RESCORE_MARGIN of those."""
    if not len(codes.ids):
        return []
    distance = np.bitwise_count(codes.words ^ sign_words(query)).sum(axis=1, dtype=np.int32)
    if doc_ids is not None:
        wanted = np.isin(codes.doc_names, np.array(sorted(doc_ids), dtype=codes.doc_names.dtype))
        distance = np.where(wanted[codes.doc_index], distance, np.iinfo(np.int32).max)
        allowed = int(wanted[codes.doc_index].sum())
    else:
        allowed = len(distance)
    n = min(allowed, max(RESCORE_FACTOR * k, RESCORE_MIN, len(codes.ids) // RESCORE_FRACTION))
    if n == 0:
        return []
    candidates = codes.ids[np.argpartition(distance, n - 1)[:n]] if n < len(distance) else codes.ids
    rows = conn.execute(
        f"SELECT b.id, b.q8, b.q8_scale FROM json_each(?) j JOIN {bits_table(kind)} b ON b.id = j.value",
        (json.dumps(candidates.tolist()),),
    ).fetchall()
    q8 = np.frombuffer(b"".join(cast(bytes, r[1]) for r in rows), dtype=np.int8).reshape(len(rows), len(query))
    approx = (q8.astype(np.float32) @ query) * np.array([r[2] for r in rows], dtype=np.float32)
    # The int8 ranking picks a few more than k; their exact float scores decide.
    best = [int(rows[i][0]) for i in np.argsort(-approx, kind="stable")[: k + RESCORE_MARGIN]]
    exact = conn.execute(
        f"""SELECT n.node_id, n.doc_id, v.embedding FROM json_each(?) j
            JOIN {vec_table(kind)} v ON v.id = j.value JOIN nodes n ON n.id = j.value""",
        (json.dumps(best),),
    ).fetchall()
    matrix = np.frombuffer(b"".join(cast(bytes, r[2]) for r in exact), dtype=np.float32).reshape(-1, len(query))
    scores = matrix @ query
    top = np.argsort(-scores, kind="stable")[:k]
    return [(str(exact[i][0]), str(exact[i][1]), float(scores[i])) for i in top]
