"""The vector store of the hierarchical index: one SQLite file holding the node tree and
its vectors, searched with sqlite-vec.

Layout (one file, WAL mode):
- `nodes`: every node of every document (retrieval reads text, parents and siblings here);
  `id` is the integer rowid shared with the vector tables.
- `documents`: one row per document with the caller's `version` hash, so a pipeline can
  tell which documents are stale.
- `vec_sentence`, `vec_paragraph`: one sqlite-vec `vec0` table per searchable kind, so
  `k` is applied *after* the kind filter by construction. float32 vectors, cosine
  distance, exact brute-force KNN (see "Latency" below), `doc_id` as a metadata column
  for filtered search.
- `node_vectors`: float32 vectors of the other kinds (section/document propagation
  results) as plain blobs; they are few, so searching them is a numpy dot product.

Every write (`upsert_document`, `delete_document`, `apply_changes`) is one
`BEGIN IMMEDIATE ... COMMIT` transaction: a crash leaves either the old or the new
document, never half of one.

Latency (bench/index_latency.py; 2 shared Xeon cores, 384 dims, warm page cache, CPU
time of the searching process): exact vec0 KNN costs ~0.65 us per row: 70 ms for 100k
sentence rows, 334 ms for 500k, 401 ms for 500k sentences + 100k paragraphs (k=10;
460 ms at k=100). Alternatives measured at 500k rows: int8 vectors were slower (0.5 s:
sqlite-vec's int8 cosine is not faster than its float one), bit-quantised coarse KNN
with the k=400 candidates a float rescoring needs took 0.24 s (under 1.5x faster, and
approximate), chunk_size 256 or 4096 was slower than the default 1024, and L2 on the
unit vectors only ~20% faster than cosine. So the store keeps exact float32 cosine search.

At 100x the WattBot corpus exact search no longer fits 100 ms, so a store can instead be
searched by `search = "binary"` (recorded in `meta`, chosen by the index config's
`vector_search`): each searchable vector also gets a 1-bit-per-dimension sign code
(`bits_<kind>`, written in the same transaction as the vector), all codes are held in
memory as packed uint64 words (48 bytes per row at 384 dims: 38 MB for 800k rows), a query
ranks every row by Hamming distance with numpy (XOR + popcount, no per-row SQLite cost), the
best candidates (RESCORE_*) are re-ranked with their int8 copies (same table), and
the best k + RESCORE_MARGIN of those get their exact float32 scores from vec0. Exact for
what it returns, approximate in what it may miss: bench/scale.py measures recall@k against
the exact search in the same run.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Concatenate, ParamSpec, TypeVar, cast

import apsw
import numpy as np
import sqlite_vec

from kohaku_rag.errors import IndexUnavailable, KohakuError
from kohaku_rag.stores.sign_codes import Codes, as_words, quantised, sign_words
from kohaku_rag.stores.store_files import (
    SCHEMA_VERSION,
    StoreHealth,
    apsw_reason,
    check_store,
    remove_store,
    replace_store,
    seal_store,
    stored_document_versions,
    stored_search_mode,
)
from kohaku_rag.stores.store_rows import (
    NODE_COLUMNS,
    NodesInput,
    VectorDigest,
    Vectors,
    bits_table,
    claim,
    kind_of,
    node_rows,
    row_to_node,
    vec_table,
    vector_items,
)
from kohaku_rag.tree import Node, NodeKind

__all__ = [
    "MAX_K",
    "SCHEMA_VERSION",
    "SEARCH_MODES",
    "VEC_KINDS",
    "DocumentRow",
    "DocumentUpsert",
    "Hit",
    "IndexMismatchError",
    "NodesInput",
    "StoreHealth",
    "VectorStore",
    "Vectors",
    "check_store",
    "remove_store",
    "replace_store",
    "seal_store",
    "stored_document_versions",
    "stored_search_mode",
]

VEC_KINDS: tuple[NodeKind, ...] = (NodeKind.SENTENCE, NodeKind.PARAGRAPH)
MAX_K = 4096  # sqlite-vec refuses larger k
SEARCH_MODES = ("exact", "binary")
# "binary": how many Hamming-ranked candidates are re-ranked: RESCORE_FACTOR per requested
# hit, at least RESCORE_MIN, and at least 1/RESCORE_FRACTION of the rows (more rows, more
# near neighbours to tell apart: bench/scale.py at 100x WattBot, 479k rows, recall@10 vs
# exact: 200 candidates 0.75, 2,000 0.97, 4,000 0.99).
RESCORE_FACTOR = 20
RESCORE_MIN = 200
RESCORE_FRACTION = 200
# ... and how many more than k of the int8-ranked ones get their exact float score.
RESCORE_MARGIN = 8


REBUILD = "`kohaku index` rebuilds the index from the lake's stored rows"


class IndexMismatchError(KohakuError):
    """The store on disk was built with other settings (dimension, embedding model)."""


def _check_readable(path: Path) -> None:
    health = check_store(path)
    problem = health.problem
    if problem is None and health.damaged:
        problem = f"the rows of {len(health.damaged)} document(s) changed behind the index's back"
    if problem is not None:
        raise IndexUnavailable(f"{path}: {problem}; {REBUILD}")


P = ParamSpec("P")
R = TypeVar("R")


def _reads(method: Callable[Concatenate[VectorStore, P], R]) -> Callable[Concatenate[VectorStore, P], R]:
    """A search or read that meets a damaged page refuses in one line (`IndexUnavailable`)."""

    @functools.wraps(method)
    def wrapper(self: VectorStore, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._reading():
            return method(self, *args, **kwargs)

    return wrapper


@dataclass(frozen=True)
class Hit:
    node_id: str
    doc_id: str
    kind: NodeKind
    score: float  # cosine similarity, higher is closer


@dataclass(frozen=True)
class DocumentUpsert:
    """Everything `apply_changes` needs to (re)write one document."""

    doc_id: str
    version: str
    nodes: NodesInput
    vectors: Vectors
    title: str = ""
    url: str = ""


@dataclass(frozen=True)
class DocumentRow:
    doc_id: str
    version: str
    title: str
    url: str
    n_nodes: int
    updated_at: str


class VectorStore:
    """Node tree + vectors of all indexed documents in one sqlite-vec file.

    `model_id`, when given, is recorded on creation and checked on every later open, so
    switching to another embedder of the same dimension is caught as well.
    """

    def __init__(
        self, path: Path, dim: int, *, model_id: str | None = None, search: str | None = None, create: bool = True
    ) -> None:
        """`search`: "exact" or "binary" (see the module doc), recorded in the store; None
        keeps what the store records ("exact" for a new one). `create=False` (readers) opens
        an existing store only: an absent or unreadable file raises `IndexUnavailable`
        instead of becoming a new, empty store that answers every search with nothing."""
        if dim < 1:
            raise ValueError(f"vector dimension must be positive, got {dim}")
        if search is not None and search not in SEARCH_MODES:
            raise ValueError(f"vector search {search!r} is not one of {list(SEARCH_MODES)}")
        self.path = Path(path)
        self.dim = dim
        self.search_mode = "exact"
        self._codes: dict[NodeKind, Codes] = {}  # "binary": the codes in memory, loaded on first search
        self._codes_version = -1
        # search_attached: per attachment, the paragraphs' (node ids, doc ids, vectors) in memory
        self._attached: dict[str, tuple[list[str], list[str], np.ndarray]] = {}
        self._writable = create
        if not create:
            _check_readable(self.path)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # Readers open read-only: a published generation is never written again, and a
        # reader must not create a file where none is.
        flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE if create else apsw.SQLITE_OPEN_READONLY
        self._conn = apsw.Connection(str(self.path), flags=flags)
        try:
            self._conn.enable_load_extension(True)
            self._conn.load_extension(sqlite_vec.loadable_path())
            self._conn.enable_load_extension(False)
            # Several processes may open one store: wait for a lock, don't fail.
            self._conn.set_busy_timeout(60_000)
            if create:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._init_schema(model_id)
                self._init_search(search)
            else:
                self._check_meta(self._meta(), model_id)
                self.search_mode = self._meta().get("search", "exact")
        except apsw.Error as exc:
            self._conn.close()
            raise IndexUnavailable(f"{self.path}: unreadable ({exc}); {REBUILD}") from None
        except BaseException:
            self._conn.close()
            raise

    def _meta(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self._conn.execute("SELECT key, value FROM meta").fetchall()}

    # ---- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> VectorStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _init_schema(self, model_id: str | None) -> None:
        with self._write():
            self._conn.execute("CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            meta: dict[str, str] = {
                str(k): str(v) for k, v in self._conn.execute("SELECT key, value FROM meta").fetchall()
            }
            if not meta:
                meta = {"schema_version": SCHEMA_VERSION, "dim": str(self.dim)}
                if model_id is not None:
                    meta["model_id"] = model_id
                self._conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", meta.items())
            self._check_meta(meta, model_id)
            self._conn.execute(
                """
                CREATE TABLE IF NOT EXISTS documents(
                    doc_id TEXT PRIMARY KEY, version TEXT NOT NULL, title TEXT NOT NULL,
                    url TEXT NOT NULL, n_nodes INTEGER NOT NULL, updated_at TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS nodes(
                    id INTEGER PRIMARY KEY, node_id TEXT NOT NULL UNIQUE, doc_id TEXT NOT NULL,
                    parent_id TEXT, kind TEXT NOT NULL, ordinal INTEGER NOT NULL,
                    title TEXT NOT NULL, text TEXT NOT NULL, page INTEGER, bbox TEXT,
                    attachment TEXT NOT NULL, media_hash TEXT, length INTEGER NOT NULL);
                CREATE INDEX IF NOT EXISTS nodes_by_doc ON nodes(doc_id);
                CREATE INDEX IF NOT EXISTS nodes_by_parent ON nodes(parent_id, ordinal);
                CREATE TABLE IF NOT EXISTS node_vectors(
                    id INTEGER PRIMARY KEY, kind TEXT NOT NULL, doc_id TEXT NOT NULL,
                    embedding BLOB NOT NULL);
                CREATE INDEX IF NOT EXISTS node_vectors_by_kind ON node_vectors(kind, doc_id);
                """
            )
            for kind in VEC_KINDS:
                self._conn.execute(
                    f"CREATE VIRTUAL TABLE IF NOT EXISTS {vec_table(kind)} USING vec0("
                    f"id INTEGER PRIMARY KEY, embedding float[{self.dim}] distance_metric=cosine, "
                    "doc_id TEXT)"
                )

    def _check_meta(self, meta: dict[str, str], model_id: str | None) -> None:
        rebuild = "`kohaku index` rebuilds the index from the lake's stored rows"
        if meta.get("schema_version") != SCHEMA_VERSION:
            raise IndexMismatchError(
                f"{self.path}: index schema version {meta.get('schema_version')!r}, this code "
                f"needs {SCHEMA_VERSION!r}; {rebuild}"
            )
        if int(meta["dim"]) != self.dim:
            raise IndexMismatchError(
                f"{self.path}: index holds {meta['dim']}-dimensional vectors but the embedder "
                f"gives {self.dim} (embedder switched?); {rebuild}"
            )
        stored_model = meta.get("model_id")
        if model_id is not None and stored_model is not None and stored_model != model_id:
            raise IndexMismatchError(
                f"{self.path}: index was built with embedder {stored_model!r}, not {model_id!r}; {rebuild}"
            )

    def _init_search(self, search: str | None) -> None:
        """Record (and, switching to "binary", build) the search mode in one transaction."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'search'").fetchone()
        recorded = str(row[0]) if row else "exact"
        wanted = search or recorded
        if wanted != recorded:
            with self._write():
                self._conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('search', ?)", (wanted,))
                for kind in VEC_KINDS:
                    self._conn.execute(f"DROP TABLE IF EXISTS {bits_table(kind)}")
                    if wanted == "binary":
                        self._create_bits(kind)
                        rows = self._conn.execute(f"SELECT id, embedding FROM {vec_table(kind)}")
                        self._conn.executemany(
                            f"INSERT INTO {bits_table(kind)}(id, code, q8, q8_scale) VALUES (?, ?, ?, ?)",
                            ((i, *quantised(np.frombuffer(v, np.float32))) for i, v in rows),
                        )
        self.search_mode = wanted

    def _create_bits(self, kind: NodeKind) -> None:
        # code: the sign bits; q8 + q8_scale: the vector as int8 (reading floats back out of
        # vec0 costs 150-270 us per row, too slow for a few hundred candidates per query).
        self._conn.execute(
            f"CREATE TABLE IF NOT EXISTS {bits_table(kind)}("
            "id INTEGER PRIMARY KEY, code BLOB NOT NULL, q8 BLOB NOT NULL, q8_scale REAL NOT NULL)"
        )

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One write transaction. IMMEDIATE takes the write lock up front, so two writers
        queue on the busy timeout instead of failing on a read-to-write upgrade."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            # SQLite may already have rolled back (e.g. disk full); don't mask that error.
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # ---- writes ----------------------------------------------------------------------

    def upsert_document(
        self,
        doc_id: str,
        version: str,
        nodes: NodesInput,
        vectors: Vectors,
        title: str = "",
        url: str = "",
    ) -> None:
        """Replace every row of `doc_id` (nodes, vectors, version) in one transaction."""
        self.apply_changes([DocumentUpsert(doc_id, version, nodes, vectors, title, url)], [])

    def delete_document(self, doc_id: str) -> None:
        self.apply_changes([], [doc_id])

    def apply_changes(self, upserts: Iterable[DocumentUpsert], deletes: Iterable[str]) -> dict[str, str]:
        """Delete then upsert many documents in ONE transaction: all or nothing; returns the
        digest of each upserted document's vectors (`vector_digests` recomputes them).

        Deleting an absent document is a no-op. A document may appear once at most.
        """
        digests: dict[str, str] = {}
        self._codes.clear()
        self._attached.clear()
        with self._write():
            seen: set[str] = set()
            for doc_id in deletes:
                claim(seen, doc_id)
                self._delete_rows(doc_id)
            for upsert in upserts:
                claim(seen, upsert.doc_id)
                self._delete_rows(upsert.doc_id)
                digests[upsert.doc_id] = self._insert(upsert)
        return digests

    def _delete_rows(self, doc_id: str) -> None:
        for kind in VEC_KINDS:
            ids = self._conn.execute(
                "SELECT id FROM nodes WHERE doc_id = ? AND kind = ?", (doc_id, str(kind))
            ).fetchall()
            # Point deletes by rowid: a `WHERE doc_id = ?` on vec0 would scan the whole table.
            self._conn.executemany(f"DELETE FROM {vec_table(kind)} WHERE id = ?", ids)
            if self.search_mode == "binary":
                self._conn.executemany(f"DELETE FROM {bits_table(kind)} WHERE id = ?", ids)
        self._conn.execute("DELETE FROM node_vectors WHERE doc_id = ?", (doc_id,))
        self._conn.execute("DELETE FROM nodes WHERE doc_id = ?", (doc_id,))
        self._conn.execute("DELETE FROM documents WHERE doc_id = ?", (doc_id,))

    def _insert(self, up: DocumentUpsert) -> str:
        rows = node_rows(up.doc_id, up.nodes)
        try:
            self._conn.executemany(
                f"INSERT INTO nodes({NODE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
        except apsw.ConstraintError as exc:
            raise ValueError(f"document {up.doc_id!r}: a node id is already used by another document ({exc})") from exc
        ids = dict(self._conn.execute("SELECT node_id, id FROM nodes WHERE doc_id = ?", (up.doc_id,)))
        kinds = {r[0]: r[3] for r in rows}
        by_kind: dict[str, list[tuple[int, bytes, str]]] = {}
        digest = VectorDigest()
        for node_id, vec in vector_items(up.doc_id, up.vectors, self.dim):
            if node_id not in ids:
                raise ValueError(f"document {up.doc_id!r}: vector for unknown node {node_id!r}")
            by_kind.setdefault(str(kinds[node_id]), []).append((ids[node_id], vec.tobytes(), up.doc_id))
            digest.add(node_id, vec.tobytes())
        for kind, items in by_kind.items():
            if kind in VEC_KINDS:
                self._conn.executemany(
                    f"INSERT INTO {vec_table(NodeKind(kind))}(id, embedding, doc_id) VALUES (?, ?, ?)", items
                )
                if self.search_mode == "binary":
                    self._conn.executemany(
                        f"INSERT INTO {bits_table(NodeKind(kind))}(id, code, q8, q8_scale) VALUES (?, ?, ?, ?)",
                        [(i, *quantised(np.frombuffer(blob, np.float32))) for i, blob, _d in items],
                    )
            else:
                self._conn.executemany(
                    "INSERT INTO node_vectors(id, kind, doc_id, embedding) VALUES (?, ?, ?, ?)",
                    [(i, kind, d, blob) for i, blob, d in items],
                )
        self._conn.execute(
            "INSERT INTO documents(doc_id, version, title, url, n_nodes, updated_at) VALUES (?, ?, ?, ?, ?, ?)",
            (up.doc_id, up.version, up.title, up.url, len(rows), datetime.now(UTC).isoformat()),
        )
        return digest.hexdigest()

    # ---- reads -----------------------------------------------------------------------

    def document_versions(self) -> dict[str, str]:
        return {str(d): str(v) for d, v in self._conn.execute("SELECT doc_id, version FROM documents").fetchall()}

    def document_counts(self) -> dict[str, dict[str, int]]:
        """document -> table -> rows: its nodes, its vectors per searchable kind, its other
        vectors (what a published generation records, and opening it checks)."""
        counts: dict[str, dict[str, int]] = {}
        queries = [("nodes", "SELECT doc_id, count(*) FROM nodes GROUP BY doc_id")]
        queries += [(k.value, f"SELECT doc_id, count(*) FROM {vec_table(k)} GROUP BY doc_id") for k in VEC_KINDS]
        queries.append(("other", "SELECT doc_id, count(*) FROM node_vectors GROUP BY doc_id"))
        with self._reading():
            for table, sql in queries:
                for doc_id, n in self._conn.execute(sql):
                    counts.setdefault(str(doc_id), {})[table] = int(cast(int, n))
        return counts

    def table_totals(self) -> dict[str, int]:
        """table -> rows, counted without reading a vector (checked on every open)."""
        with self._reading():
            (nodes,) = self._conn.execute("SELECT count(*) FROM nodes").fetchall()[0]
            (other,) = self._conn.execute("SELECT count(*) FROM node_vectors").fetchall()[0]
            totals = {"nodes": int(cast(int, nodes)), "other": int(cast(int, other))}
            for kind in VEC_KINDS:
                totals[kind.value] = self.count(kind)
        return totals

    def vector_digests(self) -> dict[str, str]:
        """document -> digest of its stored vectors, read back from every table (slow: for
        `kohaku doctor`; the writer gets the same digests from `apply_changes`)."""
        digests: dict[str, VectorDigest] = {}
        with self._reading():
            names = {
                int(cast(int, i)): (str(n), str(d))
                for i, n, d in self._conn.execute("SELECT id, node_id, doc_id FROM nodes")
            }
            tables = [f"SELECT id, embedding FROM {vec_table(k)}" for k in VEC_KINDS]
            for sql in (*tables, "SELECT id, embedding FROM node_vectors"):
                for rowid, blob in self._conn.execute(sql):
                    node_id, doc_id = names.get(int(cast(int, rowid)), (f"#{rowid}", "(no node)"))
                    digests.setdefault(doc_id, VectorDigest()).add(node_id, cast(bytes, blob))
        return {d: v.hexdigest() for d, v in digests.items()}

    def quick_check(self) -> str | None:
        """SQLite's `PRAGMA quick_check` (None: ok)."""
        with self._reading():
            rows = [str(r[0]) for r in self._conn.execute("PRAGMA quick_check").fetchall()]
        return None if rows == ["ok"] else "; ".join(rows[:3])

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """A read that finds damage raises `IndexUnavailable` (one line, the fix), never a raw
        SQLite error: a file can be readable as a whole and damaged in some pages."""
        try:
            yield
        except apsw.Error as exc:
            raise IndexUnavailable(f"{self.path}: damaged ({apsw_reason(exc)}); {REBUILD}") from None

    def documents(self) -> list[DocumentRow]:
        rows = self._conn.execute(
            "SELECT doc_id, version, title, url, n_nodes, updated_at FROM documents ORDER BY doc_id"
        )
        return [DocumentRow(*r) for r in rows]

    @_reads
    def search(
        self,
        query_vec: np.ndarray,
        kinds: Sequence[str] = (NodeKind.SENTENCE, NodeKind.PARAGRAPH),
        k: int = 10,
        doc_ids: Collection[str] | None = None,
    ) -> list[Hit]:
        """The `k` nodes closest to `query_vec` among `kinds` (and `doc_ids`, if given).

        Each kind is searched for its own top `k` (exactly), then the union is cut to the
        best `k` overall by cosine similarity; ties break on node id.
        """
        if not 1 <= k <= MAX_K:
            raise ValueError(f"k must be between 1 and {MAX_K}, got {k}")
        query = self._query(query_vec)
        if doc_ids is not None and not doc_ids:
            return []
        docs_json = json.dumps(sorted(doc_ids)) if doc_ids is not None else None
        hits: list[Hit] = []
        for kind in dict.fromkeys(kind_of(x) for x in kinds):
            if kind in VEC_KINDS and self.search_mode == "binary":
                hits.extend(self._search_binary(kind, query, k, doc_ids))
            elif kind in VEC_KINDS:
                hits.extend(self._search_vec(kind, query, k, docs_json))
            else:
                hits.extend(self._search_plain(kind, query, k, docs_json))
        hits.sort(key=lambda h: (-h.score, h.node_id))
        return hits[:k]

    def _query(self, query_vec: np.ndarray) -> np.ndarray:
        q = np.asarray(query_vec, dtype=np.float32).reshape(-1)
        if q.shape != (self.dim,):
            raise ValueError(f"query vector has {q.size} values but the index holds {self.dim}-dimensional vectors")
        norm = float(np.linalg.norm(q))
        if not np.isfinite(norm) or norm == 0.0:
            raise ValueError("query vector is zero or not finite")
        return q / norm

    def _search_vec(self, kind: NodeKind, query: np.ndarray, k: int, docs_json: str | None) -> list[Hit]:
        doc_filter = " AND doc_id IN (SELECT value FROM json_each(?))" if docs_json is not None else ""
        params: tuple[object, ...] = (query.tobytes(), k) + ((docs_json,) if docs_json is not None else ())
        rows = self._conn.execute(
            f"""WITH knn AS (
                    SELECT id, distance FROM {vec_table(kind)}
                    WHERE embedding MATCH ? AND k = ?{doc_filter})
                SELECT n.node_id, n.doc_id, knn.distance FROM knn JOIN nodes n ON n.id = knn.id""",
            params,
        )
        return [Hit(node_id, doc_id, kind, 1.0 - distance) for node_id, doc_id, distance in rows]

    def _search_binary(self, kind: NodeKind, query: np.ndarray, k: int, doc_ids: Collection[str] | None) -> list[Hit]:
        """Hamming ranking of the in-memory sign codes, int8 re-ranking of the best
        candidates, exact cosine of the best k + RESCORE_MARGIN of those."""
        codes = self._codes_of(kind)
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
        rows = self._conn.execute(
            f"SELECT b.id, b.q8, b.q8_scale FROM json_each(?) j JOIN {bits_table(kind)} b ON b.id = j.value",
            (json.dumps(candidates.tolist()),),
        ).fetchall()
        q8 = np.frombuffer(b"".join(cast(bytes, r[1]) for r in rows), dtype=np.int8).reshape(len(rows), self.dim)
        approx = (q8.astype(np.float32) @ query) * np.array([r[2] for r in rows], dtype=np.float32)
        # The int8 ranking picks a few more than k; their exact float scores decide.
        best = [int(rows[i][0]) for i in np.argsort(-approx, kind="stable")[: k + RESCORE_MARGIN]]
        exact = self._conn.execute(
            f"""SELECT n.node_id, n.doc_id, v.embedding FROM json_each(?) j
                JOIN {vec_table(kind)} v ON v.id = j.value JOIN nodes n ON n.id = j.value""",
            (json.dumps(best),),
        ).fetchall()
        matrix = np.frombuffer(b"".join(cast(bytes, r[2]) for r in exact), dtype=np.float32).reshape(-1, self.dim)
        scores = matrix @ query
        top = np.argsort(-scores, kind="stable")[:k]
        return [Hit(exact[i][0], exact[i][1], kind, float(scores[i])) for i in top]

    def _codes_of(self, kind: NodeKind) -> Codes:
        """The kind's codes in memory, reloaded when any connection changed the file."""
        self._check_version()
        if kind not in self._codes:
            rows = self._conn.execute(
                f"SELECT b.id, n.doc_id, b.code FROM {bits_table(kind)} b JOIN nodes n ON n.id = b.id ORDER BY b.id"
            ).fetchall()
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            doc_names, doc_index = np.unique(np.array([r[1] for r in rows], dtype=str), return_inverse=True)
            raw = np.frombuffer(b"".join(cast(bytes, r[2]) for r in rows), dtype=np.uint8)
            self._codes[kind] = Codes(ids, doc_names, doc_index, as_words(raw.reshape(len(rows), -1)))
        return self._codes[kind]

    @_reads
    def search_attached(self, query_vec: np.ndarray, attachment: str, k: int) -> list[Hit]:
        """The `k` paragraphs holding `attachment` ("image": the figures) closest to
        `query_vec`, searched on their own (KohakuRAG's separate image search). They are few,
        so their vectors are read once (again when the file changes) and scored with numpy."""
        if not 1 <= k <= MAX_K:
            raise ValueError(f"k must be between 1 and {MAX_K}, got {k}")
        query = self._query(query_vec)
        self._check_version()
        if attachment not in self._attached:
            rows = self._conn.execute(
                f"""SELECT n.node_id, n.doc_id, v.embedding FROM nodes n
                    JOIN {vec_table(NodeKind.PARAGRAPH)} v ON v.id = n.id
                    WHERE n.kind = ? AND n.attachment = ? ORDER BY n.id""",
                (str(NodeKind.PARAGRAPH), attachment),
            ).fetchall()
            raw = b"".join(cast(bytes, r[2]) for r in rows)
            matrix = np.frombuffer(raw, dtype=np.float32).reshape(len(rows), self.dim)
            self._attached[attachment] = ([str(r[0]) for r in rows], [str(r[1]) for r in rows], matrix)
        ids, docs, matrix = self._attached[attachment]
        if not ids:
            return []
        scores = matrix @ query
        top = np.argsort(-scores, kind="stable")[:k]
        return [Hit(ids[i], docs[i], NodeKind.PARAGRAPH, float(scores[i])) for i in top]

    def _check_version(self) -> None:
        """Forget what is held in memory when another connection changed the file."""
        # data_version moves when another connection commits; this one's own writes clear
        # the caches in apply_changes.
        version = int(cast(int, self._conn.execute("PRAGMA data_version").fetchall()[0][0]))
        if version != self._codes_version:
            self._codes.clear()
            self._attached.clear()
            self._codes_version = version

    def _search_plain(self, kind: NodeKind, query: np.ndarray, k: int, docs_json: str | None) -> list[Hit]:
        doc_filter = " AND v.doc_id IN (SELECT value FROM json_each(?))" if docs_json is not None else ""
        params: tuple[object, ...] = (str(kind),) + ((docs_json,) if docs_json is not None else ())
        rows = self._conn.execute(
            f"""SELECT n.node_id, n.doc_id, v.embedding FROM node_vectors v JOIN nodes n ON n.id = v.id
                WHERE v.kind = ?{doc_filter}""",
            params,
        ).fetchall()
        if not rows:
            return []
        matrix = np.frombuffer(b"".join(cast(bytes, r[2]) for r in rows), dtype=np.float32).reshape(len(rows), self.dim)
        scores = matrix @ query
        top = np.argsort(-scores, kind="stable")[:k]
        return [Hit(rows[i][0], rows[i][1], kind, float(scores[i])) for i in top]

    @_reads
    def get_nodes(self, ids: Iterable[str]) -> dict[str, Node]:
        """The stored nodes among `ids` (absent ids are left out)."""
        rows = self._conn.execute(
            f"SELECT {NODE_COLUMNS} FROM nodes WHERE node_id IN (SELECT value FROM json_each(?))",
            (json.dumps(list(ids)),),
        )
        return {r[0]: row_to_node(r) for r in rows}

    @_reads
    def children(self, node_id: str) -> list[Node]:
        rows = self._conn.execute(f"SELECT {NODE_COLUMNS} FROM nodes WHERE parent_id = ? ORDER BY ordinal", (node_id,))
        return [row_to_node(r) for r in rows]

    @_reads
    def vector(self, node_id: str) -> np.ndarray | None:
        """The stored (L2-normalised) vector of a node, None if it has none."""
        row = self._conn.execute("SELECT id, kind FROM nodes WHERE node_id = ?", (node_id,)).fetchone()
        if row is None:
            return None
        rowid, kind = row
        if kind in VEC_KINDS:
            found = self._conn.execute(f"SELECT embedding FROM {vec_table(NodeKind(kind))} WHERE id = ?", (rowid,))
        else:
            found = self._conn.execute("SELECT embedding FROM node_vectors WHERE id = ?", (rowid,))
        blob = found.fetchone()
        return None if blob is None else np.frombuffer(blob[0], dtype=np.float32).copy()

    def count(self, kind: str) -> int:
        """Number of stored vectors of `kind`."""
        node_kind = kind_of(kind)
        if node_kind in VEC_KINDS:
            # vec0's rowid map counts rows without reading vectors.
            sql, params = f"SELECT count(*) FROM {vec_table(node_kind)}_rowids", tuple[str, ...]()
        else:
            sql, params = "SELECT count(*) FROM node_vectors WHERE kind = ?", (str(node_kind),)
        (count,) = self._conn.execute(sql, params).fetchall()[0]
        return int(cast(int, count))
