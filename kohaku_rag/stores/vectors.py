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

Latency (bench/indexing/index_latency.py; 2 shared Xeon cores, 384 dims, warm page cache, CPU
time of the searching process): exact vec0 KNN costs ~0.65 us per row: 70 ms for 100k
sentence rows, 334 ms for 500k, 401 ms for 500k sentences + 100k paragraphs (k=10;
460 ms at k=100). Alternatives measured at 500k rows: int8 vectors were slower (0.5 s:
sqlite-vec's int8 cosine is not faster than its float one), bit-quantised coarse KNN
with the k=400 candidates a float rescoring needs took 0.24 s (under 1.5x faster, and
approximate), chunk_size 256 or 4096 was slower than the default 1024, and L2 on the
unit vectors only ~20% faster than cosine. So the store keeps exact float32 cosine search.

At 100x the WattBot corpus a store can instead be searched by `search = "binary"`
(sign_codes.py).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Concatenate, ParamSpec, TypeVar, cast

import apsw
import numpy as np
import sqlite_vec

from kohaku_rag.document.tree import Node, NodeKind
from kohaku_rag.errors import IndexUnavailable, KohakuError
from kohaku_rag.stores import store_checks
from kohaku_rag.stores.sign_codes import Codes, binary_search, create_bits, load_codes
from kohaku_rag.stores.store_files import (
    SCHEMA_VERSION,
    StoreHealth,
    apsw_reason,
    check_store,
    create_tables,
    remove_store,
    replace_store,
    seal_store,
    stored_document_versions,
    stored_search_mode,
)
from kohaku_rag.stores.store_rows import (
    NODE_COLUMNS,
    VEC_KINDS,
    DocumentRow,
    DocumentUpsert,
    Hit,
    NodesInput,
    Vectors,
    bits_table,
    claim,
    kind_of,
    row_to_node,
    vec_table,
)
from kohaku_rag.stores.store_writes import delete_rows, insert_document

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

MAX_K = 4096  # sqlite-vec refuses larger k
SEARCH_MODES = ("exact", "binary")


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
            create_tables(self._conn, self.dim)

    def _check_meta(self, meta: dict[str, str], model_id: str | None) -> None:
        if meta.get("schema_version") != SCHEMA_VERSION:
            raise IndexMismatchError(
                f"{self.path}: index schema version {meta.get('schema_version')!r}, this code "
                f"needs {SCHEMA_VERSION!r}; {REBUILD}"
            )
        if int(meta["dim"]) != self.dim:
            raise IndexMismatchError(
                f"{self.path}: index holds {meta['dim']}-dimensional vectors but the embedder "
                f"gives {self.dim} (embedder switched?); {REBUILD}"
            )
        stored_model = meta.get("model_id")
        if model_id is not None and stored_model is not None and stored_model != model_id:
            raise IndexMismatchError(
                f"{self.path}: index was built with embedder {stored_model!r}, not {model_id!r}; {REBUILD}"
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
                        create_bits(self._conn, kind)
        self.search_mode = wanted

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
        binary = self.search_mode == "binary"
        self._codes.clear()
        self._attached.clear()
        with self._write():
            seen: set[str] = set()
            for doc_id in deletes:
                claim(seen, doc_id)
                delete_rows(self._conn, doc_id, binary=binary)
            for upsert in upserts:
                claim(seen, upsert.doc_id)
                delete_rows(self._conn, upsert.doc_id, binary=self.search_mode == "binary")
                digests[upsert.doc_id] = insert_document(
                    self._conn, upsert, self.dim, binary=self.search_mode == "binary"
                )
        return digests

    # ---- reads -----------------------------------------------------------------------

    def document_versions(self) -> dict[str, str]:
        return {str(d): str(v) for d, v in self._conn.execute("SELECT doc_id, version FROM documents").fetchall()}

    def document_counts(self) -> dict[str, dict[str, int]]:
        """document -> table -> rows (what a published generation records per document)."""
        with self._reading():
            return store_checks.document_counts(self._conn)

    def table_totals(self) -> dict[str, int]:
        """table -> rows, counted without reading a vector (checked on every open)."""
        with self._reading():
            return store_checks.table_totals(self._conn)

    def vector_digests(self) -> dict[str, str]:
        """document -> digest of its stored vectors (slow: for `kohaku doctor`; the writer
        gets the same digests from `apply_changes`)."""
        with self._reading():
            return store_checks.vector_digests(self._conn)

    def quick_check(self) -> str | None:
        """SQLite's `PRAGMA quick_check` (None: ok)."""
        with self._reading():
            return store_checks.quick_check(self._conn)

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
                self._check_version()
                if kind not in self._codes:
                    self._codes[kind] = load_codes(self._conn, kind)
                found = binary_search(self._conn, self._codes[kind], kind, query, k, doc_ids)
                hits.extend(Hit(node_id, doc_id, kind, score) for node_id, doc_id, score in found)
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
        return store_checks.count_vectors(self._conn, kind_of(kind))
