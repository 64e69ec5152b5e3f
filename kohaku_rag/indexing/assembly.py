"""Assembling the index from the per-document index rows, as generations.

Every part is written as new files beside the live ones and staged; the generation is
published by one rename of the manifest when all parts agree (lake/manifest.py), so a
run killed between two parts is never served as a mix, and the next run redoes what the
published generation lacks (`index_health.indexes_behind`).

The vector store of the next generation starts as a copy of the live one, updated per
document (only versions that changed) in one transaction; a live store that can't be
trusted (absent, damaged, of another schema or embedder, rows changed behind its back:
`index_health.vectors_problem`) is instead rebuilt from every document's stored rows.
BM25 is rebuilt, since its statistics are corpus-wide, from per-document token caches.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kohaku_rag.errors import DamagedRows
from kohaku_rag.indexing.index_health import (
    IndexLag,
    indexes_behind,
    vector_search_setting,
    vectors_problem,
    wanted_versions,
)
from kohaku_rag.indexing.steps import INDEX_ROWS, VERSION_KEY, bm25_tokens_path, read_source
from kohaku_rag.lake.damage import damage_marker
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.lock import hold_lake
from kohaku_rag.lake.manifest import IndexPart, describe_file, new_file, publish_staged, read_manifest, stage
from kohaku_rag.lake.tables import content_problem, parquet_metadata, write_parquet_atomic
from kohaku_rag.stores.bm25 import FORMAT_VERSION, TOKENIZER_VERSION, BM25Index, tokenize
from kohaku_rag.stores.vectors import DocumentUpsert, IndexMismatchError, VectorStore, remove_store, seal_store

__all__ = ["AssemblyStats", "BM25Stats", "IndexLag", "assemble_bm25", "assemble_vector_index", "indexes_behind"]


@dataclass(frozen=True)
class AssemblyStats:
    upserted: list[str]
    deleted: list[str]
    unchanged: int
    documents: int
    rebuilt: str = ""  # why the store was rebuilt from every document's rows ("" when updated)
    part: IndexPart | None = None  # the part staged (or the live one, unchanged); None: no documents yet
    published: bool = False  # whether a new generation was published by this step


def assemble_vector_index(lake: Lake, doc_ids: Iterable[str], dim: int, model_id: str) -> AssemblyStats:
    """Stage (and publish, when the other parts agree) a vector store holding every
    document's current rows: the live store copied and updated per document, or, when the
    live one can't be trusted, rebuilt from every document's stored rows. The live store is
    never written: a kill leaves it as it was, and the unfinished copy is deleted later."""
    with hold_lake(lake.root, "index assembly"):
        wanted = wanted_versions(lake, doc_ids)
        search = vector_search_setting(lake)
        manifest = read_manifest(lake.index_dir, strict=False)
        live = manifest.parts.get("vectors") if manifest is not None else None
        problem = (
            "no vector index yet"
            if live is None
            else vectors_problem(lake, live) or _mismatch(lake, live, dim, model_id)
        )
        base = live if live is not None and not problem else IndexPart({}, {})
        deletes = sorted(set(base.rows_versions) - set(wanted))
        changed = sorted(d for d, v in wanted.items() if base.rows_versions.get(d) != v)
        if not problem and not deletes and not changed and base.record.get("search") == search:
            now = publish_staged(lake.index_dir)  # parts staged earlier may wait for nothing else
            new = now is not None and now != manifest
            return AssemblyStats([], [], len(wanted), len(wanted), part=base, published=new)
        target = new_file(lake.index_dir, "vectors", ".sqlite")
        try:
            if not problem:
                shutil.copyfile(lake.index_dir / base.files["vectors"].name, target)
            with VectorStore(target, dim, model_id=model_id, search=search) as store:
                digests = store.apply_changes(_upserts(lake, wanted, changed), deletes)
                counts = store.document_counts()
            seal_store(target)
        except BaseException:
            remove_store(target)
            raise
        kept = {d: base.digests[d] for d in wanted if d not in digests and d in base.digests}
        record = {"search": search, "dim": str(dim), "model_id": model_id}
        part = IndexPart({"vectors": describe_file(target)}, wanted, counts, {**kept, **digests}, record)
        stage(lake.index_dir, "vectors", part)
        published = publish_staged(lake.index_dir) is not None
        rebuilt = problem if problem and live is not None else ""
        unchanged = len(wanted) - len(changed)
        return AssemblyStats(changed, deletes, unchanged, len(wanted), rebuilt or "", part, published)


def _mismatch(lake: Lake, live: IndexPart, dim: int, model_id: str) -> str | None:
    """Why the live store cannot take these vectors (None when it can)."""
    try:
        VectorStore(lake.index_dir / live.files["vectors"].name, dim, model_id=model_id, create=False).close()
    except IndexMismatchError as exc:
        return str(exc).split(": ", 1)[-1].split(";")[0]
    return None


def _upserts(lake: Lake, wanted: dict[str, str], doc_ids: list[str]) -> Iterable[DocumentUpsert]:
    for doc_id in doc_ids:
        path = lake.table(INDEX_ROWS, doc_id)
        try:
            table: pa.Table | None = pq.read_table(path)
        except (OSError, pa.ArrowException):
            table = None  # garbled behind a valid footer: content_problem says how
        problem = content_problem(path, table)
        if problem or table is None:  # rows deleted or garbled behind a valid footer: never indexed
            aside = path.with_name(path.name + ".unreadable")
            path.replace(aside)
            damage_marker(path).unlink(missing_ok=True)
            raise DamagedRows(doc_id, f"{path}: {problem}; set aside to {aside.name}, {doc_id} is recomputed "
                              "from its corpus file (`kohaku index`)")  # fmt: skip
        source = read_source(lake, doc_id)
        yield DocumentUpsert(
            doc_id,
            wanted[doc_id],
            table.drop_columns(["vector", "search_text"]),
            _row_vectors(table),
            source["title"],
            source["url"],
        )


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
    versions: dict[str, str] = field(default_factory=dict)  # document -> its version in this BM25
    published: bool = False  # whether a new generation was published by this step


_TOKENS_SCHEMA = pa.schema([("node_id", pa.string()), ("doc_id", pa.string()), ("tokens", pa.list_(pa.string()))])


def assemble_bm25(lake: Lake, doc_ids: Iterable[str]) -> BM25Stats:
    """Rebuild the BM25 index from the stored per-document paragraph texts, as a file of
    the next generation (staged, published when the other parts agree). BM25's statistics
    are corpus-wide, so the index is rebuilt; each document's tokens are cached under its
    index-rows version, so only new or changed documents are tokenized again."""

    rows: list[tuple[str, str, list[str]]] = []
    tokenized: list[str] = []
    counts: dict[str, dict[str, int]] = {}
    with hold_lake(lake.root, "index assembly"):
        wanted = wanted_versions(lake, doc_ids)
        for doc_id, version in wanted.items():
            doc_rows, fresh = _bm25_rows(lake, doc_id, version)
            rows += doc_rows
            counts[doc_id] = {"paragraphs": len(doc_rows)}
            if fresh:
                tokenized.append(doc_id)
        target = new_file(lake.index_dir, "bm25", ".npz")
        BM25Index.build(rows).save(target, {d: _bm25_version(v) for d, v in wanted.items()})
        record = {"tokenizer": TOKENIZER_VERSION, "format": str(FORMAT_VERSION)}
        stage(lake.index_dir, "bm25", IndexPart({"bm25": describe_file(target)}, wanted, counts, record=record))
        published = publish_staged(lake.index_dir) is not None
    return BM25Stats(len(rows), tokenized, {d: _bm25_version(v) for d, v in wanted.items()}, published)


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
