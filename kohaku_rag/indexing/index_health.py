"""Is the published index what the lake's per-document tables say it should be?

`indexes_behind` is what every `kohaku index` run (and the sensor) asks: per part of the
published generation (lake/manifest.py), the documents whose version differs from the
lake's, or why the part can't be trusted at all. It checks what costs nothing: each file's
size (its checksum when the size or mtime moved since it was published), the store's schema
and, per document, its rows per table (nodes and each vector table) against the counts
the manifest recorded; `kohaku index` first reads every file's checksum too
(`verify_published`), as bytes can change with the size and mtime put back. `verify_index`
(for `kohaku doctor`) also reads SQLite's `quick_check` and every document's vectors
against its digest.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kohaku_rag.errors import IndexUnavailable, KohakuError
from kohaku_rag.indexing.index_config import recorded_index_config
from kohaku_rag.indexing.search_aids import search_aids_behind
from kohaku_rag.indexing.steps import INDEX_ROWS, stored_version
from kohaku_rag.lake.damage import mark_damaged
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.manifest import FileEntry, IndexPart, Manifest, file_problem, read_manifest
from kohaku_rag.stores.bm25 import TOKENIZER_VERSION, BM25Index
from kohaku_rag.stores.vectors import VectorStore, check_store

__all__ = [
    "IndexLag",
    "bm25_problem",
    "changed_files",
    "indexes_behind",
    "vector_search_setting",
    "vectors_problem",
    "verify_index",
    "verify_published",
    "wanted_versions",
]


@dataclass(frozen=True)
class IndexLag:
    """Documents whose version in an index differs from the lake's (missing, stale or
    extra), or one "(why)" entry when the part as a whole must be rebuilt."""

    vectors: list[str]
    bm25: list[str]
    aids: list[str] = field(default_factory=list)  # the search aids (search_aids.py)

    @property
    def behind(self) -> bool:
        return bool(self.vectors or self.bm25 or self.aids)

    def problems(self) -> list[str]:
        """One line per index that can't be trusted as a whole (not merely behind a
        changed document): what the next assembly rebuilds, and why."""
        named = (("vector index", self.vectors), ("BM25 index", self.bm25), ("search aids", self.aids))
        return [
            f"rebuilding the {name} from the lake's stored rows: {lag[0][1:-1]}"
            for name, lag in named
            if len(lag) == 1 and lag[0].startswith("(") and "setting changed" not in lag[0] and "no index" not in lag[0]
        ]


def wanted_versions(lake: Lake, doc_ids: Iterable[str]) -> dict[str, str]:
    """document id -> version of its index rows, for the documents that have them."""
    stored = {d: stored_version(lake, INDEX_ROWS, d) for d in sorted(doc_ids)}
    return {d: v for d, v in stored.items() if v is not None}


def indexes_behind(lake: Lake, doc_ids: Iterable[str], corpus: Path | None = None, *, verify: bool = False) -> IndexLag:
    """Compare the published generation with the lake's current per-document versions.

    A part that is absent (or can't be trusted: see `vectors_problem`, `bm25_problem`)
    counts as holding nothing; with no documents at all an absent part is behind too
    (search needs the empty index). The search aids also follow the corpus's metadata.csv
    and expansions.csv when `corpus` is given. `verify` (`kohaku index`) first reads every
    file of the generation against its checksum (`verify_published`).
    """
    if verify:
        verify_published(lake)
    doc_ids = list(doc_ids)
    wanted = wanted_versions(lake, doc_ids)
    manifest = read_manifest(lake.index_dir, strict=False)
    parts = manifest.parts if manifest is not None else {}
    vectors = _part_lag(parts.get("vectors"), wanted, lambda p: vectors_problem(lake, p))
    if not vectors and wanted and parts["vectors"].record.get("search") != vector_search_setting(lake):
        vectors = ["(vector search setting changed)"]  # the assembly re-records it, nothing re-upserted
    return IndexLag(
        vectors=vectors,
        bm25=_part_lag(parts.get("bm25"), wanted, lambda p: bm25_problem(lake, p)),
        aids=search_aids_behind(lake, doc_ids, corpus),
    )


def changed_files(lake: Lake) -> list[tuple[str, str]]:
    """(file name, problem) for each file of the live generation whose bytes changed behind
    the size and mtime it was published with (rewritten in place, or another generation's
    file copied over it): every file read against its checksum. What the cheap checks
    already refuse is left to them."""
    manifest = read_manifest(lake.index_dir, strict=False)
    entries = [e for part in (manifest.parts.values() if manifest else ()) for e in part.files.values()]
    found = []
    for entry in entries:
        if file_problem(lake.index_dir, entry) is None:
            problem = file_problem(lake.index_dir, entry, deep=True)
            if problem is not None:
                found.append((entry.name, problem))
    return found


def verify_published(lake: Lake) -> list[str]:
    """`changed_files`, each recorded as damaged beside it (stores/damage.py), so every
    cheap check that follows (this run's assembly, search) refuses it and the assembly
    rebuilds it. Returns the names of the files found."""
    found = changed_files(lake)
    for name, problem in found:
        mark_damaged(lake.index_dir / name, problem, found_by="kohaku index")
    return [name for name, _problem in found]


def _part_lag(part: IndexPart | None, wanted: Mapping[str, str], problem_of: object) -> list[str]:
    if part is None:
        return sorted(wanted) or ["(no index yet)"]
    problem = problem_of(part)  # type: ignore[operator]
    if problem:
        return [f"({problem})"]
    have = part.rows_versions
    return sorted(d for d in have.keys() | wanted.keys() if have.get(d) != wanted.get(d))


def vector_search_setting(lake: Lake) -> str:
    """The dense search the lake's index settings ask for (recorded by `kohaku index`)."""
    cfg = recorded_index_config(lake)
    return cfg.vector_search if cfg is not None else "exact"


def vectors_problem(lake: Lake, part: IndexPart, *, deep: bool = False) -> str | None:
    """Why the published vector store can't be trusted (None: nothing found). Cheap unless
    `deep`: sizes, the schema, and every document's rows per table against the manifest."""
    entry, problem = _named_file(lake, part, "vectors", deep)
    if entry is None or problem:
        return problem
    path = lake.index_dir / entry.name
    health = check_store(path)
    if health.problem:
        return f"{entry.name} {health.problem}"
    if health.damaged:
        return f"{entry.name}: the nodes of {_few(list(health.damaged))} differ from what it recorded"
    try:
        with VectorStore(path, int(part.record.get("dim", "0") or 0) or 1, create=False) as store:
            problem = _count_problem(store.document_counts(), part.counts)
            if problem is None and deep:
                problem = store.quick_check() or _digest_problem(store.vector_digests(), part.digests)
    except (KohakuError, ValueError) as exc:
        return str(exc).split("; ", 1)[0]
    return f"{entry.name}: {problem}" if problem else None


def _named_file(lake: Lake, part: IndexPart, role: str, deep: bool) -> tuple[FileEntry | None, str | None]:
    """The part's file in `role` and what is wrong with it as a file (sizes; checksums)."""
    entry = part.files.get(role)
    if entry is None:
        return None, f"the manifest names no {role} file"
    problem = file_problem(lake.index_dir, entry, deep=deep)
    return entry, f"{entry.name} {problem}" if problem else None


def _count_problem(have: Mapping[str, Mapping[str, int]], published: Mapping[str, Mapping[str, int]]) -> str | None:
    for doc_id in sorted(have.keys() | published.keys()):
        got, want = have.get(doc_id, {}), published.get(doc_id, {})
        for table in sorted(got.keys() | want.keys()):
            if got.get(table, 0) != want.get(table, 0):
                return f"document {doc_id} has {got.get(table, 0)} {table} rows, {want.get(table, 0)} when published"
    return None


def _digest_problem(have: Mapping[str, str], published: Mapping[str, str]) -> str | None:
    wrong = sorted(d for d in have.keys() | published.keys() if have.get(d) != published.get(d))
    return f"the vectors of {_few(wrong)} differ from what was published" if wrong else None


def bm25_problem(lake: Lake, part: IndexPart, *, deep: bool = False) -> str | None:
    """Why the published BM25 index can't be trusted (None: nothing found)."""
    entry, problem = _named_file(lake, part, "bm25", deep)
    if entry is None or problem:
        return problem
    if part.record.get("tokenizer") != TOKENIZER_VERSION:
        return "tokenizer setting changed"
    if deep:
        try:
            BM25Index.load(lake.index_dir / entry.name)
        except ValueError as exc:
            return str(exc).split(": ", 1)[-1]
    return None


def verify_index(lake: Lake) -> list[tuple[str, str]]:
    """(file or part, what is wrong) for everything `kohaku doctor` checks: every checksum,
    SQLite's quick_check, the vectors against their digests, the parts' agreement."""
    try:
        manifest = read_manifest(lake.index_dir)
    except IndexUnavailable as exc:
        return [(str(lake.index_dir / "manifest.json"), str(exc).split(": ", 1)[-1].split("; ")[0])]
    if manifest is None:
        return []
    found: list[tuple[str, str]] = []
    for name, check in (("vectors", vectors_problem), ("bm25", bm25_problem)):
        part = manifest.parts.get(name)
        problem = "missing from the manifest" if part is None else check(lake, part, deep=True)
        if problem:
            found.append((_subject(lake, manifest, name), problem))
    aids = manifest.parts.get("aids")
    for entry in aids.files.values() if aids is not None else []:
        problem = file_problem(lake.index_dir, entry, deep=True)
        if problem:
            found.append((str(lake.index_dir / entry.name), f"{entry.name} {problem}"))
    return found


def _subject(lake: Lake, manifest: Manifest, part: str) -> str:
    role = "vectors" if part == "vectors" else "bm25"
    path = manifest.path(lake.index_dir, part, role)
    return str(path) if path is not None else f"{part} index"


def _few(items: list[str], n: int = 5) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")
