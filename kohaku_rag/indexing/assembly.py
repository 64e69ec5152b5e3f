"""Assembling the two indexes from the per-document index rows.

The vector index is upserted per document (only versions that changed); BM25 is rebuilt,
since its statistics are corpus-wide, from per-document token caches.

Both indexes record the per-document versions they hold (sqlite-vec's `documents` table,
arrays inside the BM25 .npz), each written atomically with the index itself. A run that
was killed mid-assembly therefore leaves indexes whose recorded versions differ from the
lake's per-document tables, and `indexes_behind` tells every later run to re-assemble.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kohaku_rag.indexing.index_config import recorded_index_config
from kohaku_rag.indexing.search_aids import search_aids_behind
from kohaku_rag.indexing.steps import INDEX_ROWS, VERSION_KEY, bm25_tokens_path, read_source, stored_version
from kohaku_rag.lake import Lake, parquet_metadata, write_parquet_atomic
from kohaku_rag.lake_lock import hold_lake
from kohaku_rag.stores.bm25 import TOKENIZER_VERSION, BM25Index, tokenize
from kohaku_rag.stores.vectors import (
    DocumentUpsert,
    IndexMismatchError,
    VectorStore,
    check_store,
    remove_store,
    replace_store,
    stored_search_mode,
)


@dataclass(frozen=True)
class AssemblyStats:
    upserted: list[str]
    deleted: list[str]
    unchanged: int
    documents: int
    rebuilt: str = ""  # why the store was rebuilt from every document's rows ("" when updated in place)


def assemble_vector_index(lake: Lake, doc_ids: Iterable[str], dim: int, model_id: str) -> AssemblyStats:
    """Bring the sqlite-vec index in line with the per-document rows.

    A healthy store is updated in place, in one transaction (documents whose version
    changed are upserted, those that left deleted): readers see the old index or the new.
    A store that is absent, unreadable, of another schema, built by another embedder or
    with rows changed behind its back is rebuilt from every document's stored rows into a file
    beside it, swapped in when complete: a kill mid-build leaves the old file (or none),
    never a half-filled index.
    """
    with hold_lake(lake.root, "index assembly"):
        wanted = _wanted(lake, doc_ids)
        search = _vector_search(lake)
        health = check_store(lake.vectors_path)
        problem = health.problem or _damage(health.damaged) or _mismatch(lake.vectors_path, dim, model_id)
        if problem:
            _build_beside(lake, wanted, dim, model_id, search)
            return AssemblyStats(sorted(wanted), [], 0, len(wanted), rebuilt=problem)
        with VectorStore(lake.vectors_path, dim, model_id=model_id, search=search) as store:
            have = store.document_versions()
            deletes = sorted(set(have) - set(wanted))
            changed = sorted(d for d, v in wanted.items() if have.get(d) != v)
            store.apply_changes(_upserts(lake, wanted, changed), deletes)
        return AssemblyStats(changed, deletes, len(wanted) - len(changed), len(wanted))


def _damage(damaged: tuple[str, ...]) -> str:
    """Rows changed behind the store's back: its vector rows may be orphaned too, so the
    store is rebuilt rather than patched."""
    if not damaged:
        return ""
    shown = ", ".join(damaged[:5]) + (", ..." if len(damaged) > 5 else "")
    return f"the rows of {len(damaged)} document(s) differ from what the store recorded ({shown})"


def _mismatch(path: Path, dim: int, model_id: str) -> str:
    """Why a readable store cannot take these vectors ("" when it can)."""
    try:
        VectorStore(path, dim, model_id=model_id).close()  # readable: check_store said so
    except IndexMismatchError as exc:
        return str(exc).split(": ", 1)[-1].split(";")[0]
    return ""


def _build_beside(lake: Lake, wanted: dict[str, str], dim: int, model_id: str, search: str) -> None:
    built = lake.index_dir / f".{lake.vectors_path.name}.building"
    remove_store(built)  # what a killed build left
    try:
        with VectorStore(built, dim, model_id=model_id, search=search) as store:
            store.apply_changes(_upserts(lake, wanted, sorted(wanted)), [])
        replace_store(built, lake.vectors_path)
    finally:
        remove_store(built)


def _upserts(lake: Lake, wanted: dict[str, str], doc_ids: list[str]) -> Iterable[DocumentUpsert]:
    for doc_id in doc_ids:
        table = pq.read_table(lake.table(INDEX_ROWS, doc_id))
        source = read_source(lake, doc_id)
        yield DocumentUpsert(
            doc_id,
            wanted[doc_id],
            table.drop_columns(["vector", "search_text"]),
            _row_vectors(table),
            source["title"],
            source["url"],
        )


def _vector_search(lake: Lake) -> str:
    """The dense search the lake's index settings ask for (recorded by `kohaku index`)."""
    cfg = recorded_index_config(lake)
    return cfg.vector_search if cfg is not None else "exact"


def _row_vectors(table: pa.Table) -> tuple[list[str], np.ndarray]:
    has = table.column("vector").is_valid()
    kept = table.filter(has)
    column = kept.column("vector").combine_chunks()
    dim = column.type.list_size
    matrix = (
        column.values.to_numpy(zero_copy_only=False).reshape(-1, dim) if len(column) else np.zeros((0, dim), np.float32)
    )
    return kept.column("node_id").to_pylist(), matrix


@dataclass(frozen=True)
class BM25Stats:
    paragraphs: int
    tokenized: list[str]  # documents whose paragraphs were tokenized (the rest came from the cache)


_TOKENS_SCHEMA = pa.schema([("node_id", pa.string()), ("doc_id", pa.string()), ("tokens", pa.list_(pa.string()))])


def assemble_bm25(lake: Lake, doc_ids: Iterable[str]) -> BM25Stats:
    """Rebuild the BM25 index from the stored per-document paragraph texts. BM25's
    statistics are corpus-wide, so the index is rebuilt; each document's tokens are cached
    under its index-rows version, so only new or changed documents are tokenized again."""

    rows: list[tuple[str, str, list[str]]] = []
    tokenized: list[str] = []
    versions: dict[str, str] = {}
    with hold_lake(lake.root, "index assembly"):
        for doc_id, version in _wanted(lake, doc_ids).items():
            doc_rows, fresh = _bm25_rows(lake, doc_id, version)
            rows += doc_rows
            versions[doc_id] = _bm25_version(version)
            if fresh:
                tokenized.append(doc_id)
        BM25Index.build(rows).save(lake.bm25_path, versions)
    return BM25Stats(len(rows), tokenized)


def _wanted(lake: Lake, doc_ids: Iterable[str]) -> dict[str, str]:
    """document id → version of its index rows, for the documents that have them."""
    stored = {d: stored_version(lake, INDEX_ROWS, d) for d in sorted(doc_ids)}
    return {d: v for d, v in stored.items() if v is not None}


@dataclass(frozen=True)
class IndexLag:
    """Documents whose version in an index differs from the lake's (missing, stale or extra)."""

    vectors: list[str]
    bm25: list[str]
    aids: list[str] = field(default_factory=list)  # the search aids (search_aids.py)

    @property
    def behind(self) -> bool:
        return bool(self.vectors or self.bm25 or self.aids)

    def problems(self) -> list[str]:
        """One line per index whose file is missing or unreadable (not merely behind a
        changed document): what the next assembly rebuilds, and why."""
        named = (("vector index", self.vectors), ("BM25 index", self.bm25), ("search aids", self.aids))
        return [
            f"rebuilding the {name} from the lake's stored rows: {lag[0][1:-1]}"
            for name, lag in named
            if len(lag) == 1 and lag[0].startswith("(") and "setting changed" not in lag[0]
        ]


def indexes_behind(lake: Lake, doc_ids: Iterable[str], corpus: Path | None = None) -> IndexLag:
    """Compare what each index holds with the lake's current per-document versions.

    An index file that is absent (or unreadable, or from before versions were recorded)
    counts as holding nothing, so it is behind as soon as any document has index rows;
    with no documents at all, an absent file is behind too (search needs the empty index).
    The search aids also follow the corpus's metadata.csv and expansions.csv when `corpus`
    is given.
    """
    doc_ids = list(doc_ids)
    wanted = _wanted(lake, doc_ids)
    health = check_store(lake.vectors_path)
    vectors = sorted(set(_differing(health.versions, wanted)) | set(health.damaged))
    if health.problem and lake.vectors_path.exists():
        vectors = [f"(vector index {health.problem})"]
    if not vectors and wanted and stored_search_mode(lake.vectors_path) != _vector_search(lake):
        vectors = ["(vector search setting changed)"]  # the assembly re-records it, nothing re-upserted
    return IndexLag(
        vectors=vectors,
        bm25=_bm25_behind(lake, {d: _bm25_version(v) for d, v in wanted.items()}),
        aids=search_aids_behind(lake, doc_ids, corpus),
    )


def _bm25_behind(lake: Lake, wanted: dict[str, str]) -> list[str]:
    have = BM25Index.saved_versions(lake.bm25_path)
    if have is None and lake.bm25_path.exists():
        return ["(bm25 index unreadable)"]
    return _differing(have, wanted)


def _differing(have: dict[str, str] | None, wanted: dict[str, str]) -> list[str]:
    if have is None:
        return sorted(wanted) or ["(no index file)"]
    return sorted(d for d in have.keys() | wanted.keys() if have.get(d) != wanted.get(d))


def _bm25_version(rows_version: str) -> str:
    """A document's version in BM25: its rows' version and the tokenizer's."""
    return f"{rows_version}:{TOKENIZER_VERSION}"


def _bm25_rows(lake: Lake, doc_id: str, rows_version: str) -> tuple[list[tuple[str, str, list[str]]], bool]:
    """(BM25 rows of a document, whether they were tokenized now rather than read back)."""

    version = _bm25_version(rows_version)
    cache = bm25_tokens_path(lake, doc_id)
    if parquet_metadata(cache).get(VERSION_KEY) == version:
        table = pq.read_table(cache)
        return list(zip(*(table.column(c).to_pylist() for c in _TOKENS_SCHEMA.names), strict=True)), False
    table = pq.read_table(lake.table(INDEX_ROWS, doc_id), columns=["node_id", "doc_id", "search_text"])
    rows = [
        (node_id, d, tokenize(text))
        for node_id, d, text in zip(
            *(table.column(c).to_pylist() for c in ("node_id", "doc_id", "search_text")), strict=True
        )
        if text
    ]
    columns: list[list[object]] = [list(c) for c in zip(*rows)] if rows else [[], [], []]
    write_parquet_atomic(pa.table(columns, schema=_TOKENS_SCHEMA), cache, {VERSION_KEY: version})
    return rows, True
