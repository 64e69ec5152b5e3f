"""The search aids: the lake's query-expansion dictionary and the document metadata that
retrieval matches questions against (HERO's query expansion and metadata boost).

Assembled like the two indexes, from what the lake already stores, so adding them to a
lake needs no re-indexing: each document's definitions ("long form (ABBR)", "ABBR (long
form)") are read from its index rows once and cached per document under
`<lake>/expansion_terms/<doc>.parquet` (stamped with the rows' version and the extractor's),
then merged with the built-in unit list and the corpus's `expansions.csv` into
`index/expansions.*.parquet`; `metadata.csv`'s titles, years and citations (author surnames)
go to `index/doc_metadata.*.parquet`. Both are files of an index generation: their part of
the manifest (lake/manifest.py) records the document versions and the hash of the two
corpus files they were built from, so `search_aids_behind` tells when to re-assemble (a
changed document, metadata.csv or expansions.csv).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kohaku_rag.errors import IndexUnavailable
from kohaku_rag.indexing.corpus import METADATA_FILE, read_metadata
from kohaku_rag.indexing.doc_metadata import DocMetadata, authors_of
from kohaku_rag.indexing.expansions import (
    EXTRACTOR_VERSION,
    USER_FILE,
    Expansions,
    as_rows,
    count_definitions,
    merge_definitions,
    read_user_file,
)
from kohaku_rag.indexing.steps import INDEX_ROWS, VERSION_KEY, read_source, stored_version
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.lock import hold_lake
from kohaku_rag.lake.manifest import (
    IndexPart,
    Manifest,
    describe_file,
    file_problem,
    new_file,
    publish_staged,
    read_manifest,
    stage,
)
from kohaku_rag.lake.tables import parquet_metadata, write_parquet_atomic

__all__ = [
    "SEARCH_AIDS_VERSION",
    "SearchAids",
    "SearchAidsStats",
    "assemble_search_aids",
    "load_search_aids",
    "search_aids_behind",
    "search_aids_fingerprint",
]

SEARCH_AIDS_VERSION = "1"  # the layout of the two files
DEFINITIONS = "expansion_terms"  # the per-document cache's folder in the lake
_DEFS_SCHEMA = pa.schema([("abbr", pa.string()), ("long_form", pa.string()), ("count", pa.int64())])
_FORMS_SCHEMA = pa.schema([("term", pa.string()), ("expansion", pa.string())])
_META_SCHEMA = pa.schema(
    [("doc_id", pa.string()), ("title", pa.string()), ("year", pa.string()), ("authors", pa.list_(pa.string()))]
)


@dataclass(frozen=True)
class SearchAids:
    expansions: Expansions
    documents: tuple[DocMetadata, ...]


@dataclass(frozen=True)
class SearchAidsStats:
    terms: int
    documents: int
    extracted: list[str]  # documents whose definitions were read now (the rest: the cache)


def expansions_path(lake: Lake) -> Path:
    """The published expansions file (a path that does not exist when none is published)."""
    return _live(lake, "expansions")


def doc_metadata_path(lake: Lake) -> Path:
    return _live(lake, "doc_metadata")


def _live(lake: Lake, role: str) -> Path:
    manifest = read_manifest(lake.index_dir, strict=False)
    path = manifest.path(lake.index_dir, "aids", role) if manifest is not None else None
    return path if path is not None else lake.index_dir / f"{role}.parquet"


def _aids_part(lake: Lake) -> IndexPart | None:
    manifest = read_manifest(lake.index_dir, strict=False)
    return manifest.parts.get("aids") if manifest is not None else None


def _wanted(lake: Lake, doc_ids: Iterable[str]) -> dict[str, str]:
    """document id -> the version of what its definitions are read from."""
    stored = {d: stored_version(lake, INDEX_ROWS, d) for d in sorted(doc_ids)}
    return {d: f"{v}:{EXTRACTOR_VERSION}" for d, v in stored.items() if v is not None}


def corpus_files_hash(corpus: Path | None) -> str:
    """What the corpus's metadata.csv and expansions.csv hold ("" without a corpus)."""
    if corpus is None:
        return ""
    digest = hashlib.sha256(SEARCH_AIDS_VERSION.encode())
    for name in (METADATA_FILE, USER_FILE):
        path = Path(corpus) / name
        digest.update(b"\0" + (path.read_bytes() if path.is_file() else b"-"))
    return digest.hexdigest()[:16]


def _definitions(lake: Lake, doc_id: str, version: str) -> tuple[Counter[tuple[str, str]], bool]:
    """(a document's definition counts, whether they were extracted now)."""
    cache = lake.root / DEFINITIONS / f"{doc_id}.parquet"
    if parquet_metadata(cache).get(VERSION_KEY) == version:
        rows = pq.read_table(cache).to_pylist()
        return Counter({(r["abbr"], r["long_form"]): int(r["count"]) for r in rows}), False
    table = pq.read_table(lake.table(INDEX_ROWS, doc_id), columns=["kind", "text"])
    texts = [
        t for k, t in zip(*(table.column(c).to_pylist() for c in ("kind", "text")), strict=True) if k == "paragraph"
    ]
    counts = count_definitions(texts)
    rows = [{"abbr": a, "long_form": f, "count": n} for (a, f), n in sorted(counts.items())]
    write_parquet_atomic(pa.Table.from_pylist(rows, schema=_DEFS_SCHEMA), cache, {VERSION_KEY: version})
    return counts, True


def assemble_search_aids(lake: Lake, doc_ids: Iterable[str], corpus: Path | None) -> SearchAidsStats:
    """Rebuild both files from the documents' cached definitions and the corpus files.
    A malformed expansions.csv raises (naming its line) before anything is written."""
    with hold_lake(lake.root, "index assembly"):
        return _assemble(lake, _wanted(lake, doc_ids), corpus)


def _assemble(lake: Lake, wanted: dict[str, str], corpus: Path | None) -> SearchAidsStats:
    user_file = Path(corpus) / USER_FILE if corpus is not None else None
    user = read_user_file(user_file) if user_file is not None and user_file.is_file() else {}
    counts: Counter[tuple[str, str]] = Counter()
    extracted: list[str] = []
    for doc_id, version in wanted.items():
        doc_counts, fresh = _definitions(lake, doc_id, version)
        counts.update(doc_counts)
        if fresh:
            extracted.append(doc_id)
    forms = merge_definitions(counts, user)
    metadata = read_metadata(Path(corpus)) if corpus is not None else {}
    docs: list[dict[str, object]] = []
    for doc_id in wanted:
        meta = metadata.get(doc_id)
        extra = meta.extra if meta is not None else {}
        title = (meta.title if meta is not None else "") or str(read_source(lake, doc_id).get("title") or "")
        docs.append(
            {
                "doc_id": doc_id,
                "title": title,
                "year": extra.get("year", "").strip()[:4],
                "authors": list(authors_of(extra.get("citation", ""))),
            }
        )
    # New files of the next generation, published with the other parts (lake/manifest.py).
    meta_file = new_file(lake.index_dir, "doc_metadata", ".parquet")
    forms_file = new_file(lake.index_dir, "expansions", ".parquet")
    write_parquet_atomic(pa.Table.from_pylist(docs, schema=_META_SCHEMA), meta_file)
    table = pa.Table.from_pylist([{"term": a, "expansion": f} for a, f in as_rows(forms)], schema=_FORMS_SCHEMA)
    write_parquet_atomic(table, forms_file)
    record = {"versions": json.dumps(wanted, sort_keys=True), "corpus_files": corpus_files_hash(corpus)}
    rows_versions = {d: v.rsplit(":", 1)[0] for d, v in wanted.items()}
    files = {"expansions": describe_file(forms_file), "doc_metadata": describe_file(meta_file)}
    stage(lake.index_dir, "aids", IndexPart(files, rows_versions, record=record))
    publish_staged(lake.index_dir)
    return SearchAidsStats(len(forms), len(docs), extracted)


def _record(lake: Lake) -> dict[str, str] | None:
    part = _aids_part(lake)
    return dict(part.record) if part is not None else None


def search_aids_behind(lake: Lake, doc_ids: Iterable[str], corpus: Path | None = None) -> list[str]:
    """Documents whose definitions the aids do not hold as the lake has them (and
    "metadata.csv/expansions.csv" when those changed, if `corpus` is given)."""
    wanted = _wanted(lake, doc_ids)
    part = _aids_part(lake)
    if part is None:
        return sorted(wanted) or ["(no index yet)"]
    for entry in part.files.values():
        problem = file_problem(lake.index_dir, entry)
        if problem:
            return [f"({entry.name} {problem})"]
    have: dict[str, str] = json.loads(part.record.get("versions", "{}"))
    behind = sorted(d for d in have.keys() | wanted.keys() if have.get(d) != wanted.get(d))
    if corpus is not None and part.record.get("corpus_files") != corpus_files_hash(corpus):
        behind.append(f"{METADATA_FILE}/{USER_FILE}")
    return behind


def search_aids_fingerprint(lake: Lake) -> str:
    """What the aids were built from (for the hash of stored retrievals that use them)."""
    record = _record(lake) or {}
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]


def load_search_aids(lake: Lake, manifest: Manifest | None = None) -> SearchAids | None:
    """The aids of the published generation (of `manifest`, when the caller opened one),
    or None when they were never assembled."""
    if manifest is None:
        manifest = read_manifest(lake.index_dir, strict=False)
    forms_file = manifest.path(lake.index_dir, "aids", "expansions") if manifest is not None else None
    meta_file = manifest.path(lake.index_dir, "aids", "doc_metadata") if manifest is not None else None
    if forms_file is None or meta_file is None:
        return None
    forms: dict[str, list[str]] = {}
    try:
        for row in pq.read_table(forms_file).to_pylist():
            forms.setdefault(row["term"], []).append(row["expansion"])
        docs = tuple(DocMetadata(**row) for row in pq.read_table(meta_file).to_pylist())
    except (OSError, pa.ArrowException) as exc:
        raise IndexUnavailable(
            f"search aids in {lake.index_dir} are unreadable ({' '.join(str(exc).split())}); "
            f"`kohaku index --lake {lake.root}` rebuilds them from the stored rows"
        ) from None
    return SearchAids(Expansions({k: tuple(v) for k, v in forms.items()}), docs)
