"""Opening the lake's published index generation for search, checked where it costs nothing.

A reader opens exactly the files one manifest names (lake/manifest.py), so it never sees
a mix of two generations. Before serving it checks each file's size (and its checksum when
its size or mtime moved since it was published: a published file is never written again)
and the vector store's rows per table against the manifest's counts, vec rows included.
What fails is refused in one line that names the file and the fix (`IndexUnavailable`);
nothing is checked per query after the open.
"""

from __future__ import annotations

from dataclasses import dataclass

from kohaku_rag.embed.base import Embedder
from kohaku_rag.errors import IndexUnavailable
from kohaku_rag.indexing.search_aids import SearchAids, load_search_aids
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.manifest import Manifest, file_problem, read_manifest
from kohaku_rag.stores.bm25 import BM25Index
from kohaku_rag.stores.vectors import VectorStore

__all__ = ["PublishedIndex", "open_published", "published_problem"]

# Files of an older layout, from before index generations: `kohaku index` re-assembles them.
_UNPUBLISHED = ("vectors.sqlite", "bm25.npz")


@dataclass(frozen=True)
class PublishedIndex:
    manifest: Manifest
    store: VectorStore
    bm25: BM25Index | None
    aids: SearchAids | None


class _Vanished(Exception):
    """A file of the manifest read is gone: a newer generation was published meanwhile."""


def open_published(lake: Lake, embedder: Embedder, *, bm25: bool = True) -> PublishedIndex:
    """The published generation's vector store (checked against `embedder`), BM25 index and
    search aids. Raises `IndexUnavailable` (the file, what is wrong, the fix)."""
    for attempt in range(3):
        manifest = read_manifest(lake.index_dir)
        if manifest is None:
            raise IndexUnavailable(_no_index(lake))
        try:
            return _open(lake, manifest, embedder, bm25)
        except _Vanished:
            if attempt == 2:
                break
    raise IndexUnavailable(f"{lake.index_dir}: the index keeps changing while it is opened; try again")


def published_problem(lake: Lake) -> str | None:
    """What opening the published generation for search would refuse, in its words (None:
    it opens), without an embedder: the checks `open_published` makes, at the same cost."""
    try:
        manifest = read_manifest(lake.index_dir)
        if manifest is None:
            return _no_index(lake)
        _check_files(lake, manifest)
        vectors = manifest.parts["vectors"]
        dim = int(vectors.record.get("dim", "0") or 0) or 1
        with VectorStore(lake.index_dir / vectors.files["vectors"].name, dim, create=False) as store:
            _check_totals(lake, store, manifest)
    except _Vanished:
        return None  # a newer generation was published meanwhile: the next look checks it
    except (IndexUnavailable, KeyError) as exc:
        return str(exc) if isinstance(exc, IndexUnavailable) else f"{lake.manifest_path}: names no {exc} part"
    return None


def _fix(lake: Lake) -> str:
    return f"`kohaku index --lake {lake.root}` rebuilds it from the stored rows"


def _check_files(lake: Lake, manifest: Manifest) -> None:
    """Each file the manifest names, by size (and checksum when its size or mtime moved)."""
    for _name, part in manifest.parts.items():
        for entry in part.files.values():
            problem = file_problem(lake.index_dir, entry)
            if problem is None:
                continue
            if problem == "is missing" and read_manifest(lake.index_dir, strict=False) != manifest:
                raise _Vanished()
            raise IndexUnavailable(f"{lake.index_dir / entry.name} {problem}; {_fix(lake)}")


def _check_totals(lake: Lake, store: VectorStore, manifest: Manifest) -> None:
    """The store's rows per table against the manifest's counts (no vector is read)."""
    vectors = manifest.parts["vectors"]
    for table, rows in store.table_totals().items():
        if rows != vectors.total(table):
            raise IndexUnavailable(
                f"{store.path}: holds {rows} {table} rows, {vectors.total(table)} when it was published; {_fix(lake)}"
            )


def _open(lake: Lake, manifest: Manifest, embedder: Embedder, with_bm25: bool) -> PublishedIndex:
    fix = _fix(lake)
    _check_files(lake, manifest)
    vectors = manifest.parts["vectors"]
    path = lake.index_dir / vectors.files["vectors"].name
    store = VectorStore(path, embedder.dim, model_id=embedder.model_id, create=False)
    try:
        _check_totals(lake, store, manifest)
        bm25 = _load_bm25(lake, manifest, fix) if with_bm25 else None
        aids = load_search_aids(lake, manifest) if with_bm25 else None
    except BaseException:
        store.close()
        raise
    return PublishedIndex(manifest, store, bm25, aids)


def _load_bm25(lake: Lake, manifest: Manifest, fix: str) -> BM25Index:
    path = manifest.path(lake.index_dir, "bm25", "bm25")
    if path is None:
        raise IndexUnavailable(f"{lake.manifest_path}: names no BM25 index; {fix}")
    try:
        return BM25Index.load(path)
    except (OSError, ValueError) as exc:
        raise IndexUnavailable(f"{path}: {str(exc).split(': ', 1)[-1].split(';')[0]}; {fix}") from None


def _no_index(lake: Lake) -> str:
    if any((lake.index_dir / name).exists() for name in _UNPUBLISHED):
        return (
            f"the index in {lake.index_dir} was built by an earlier version (no manifest.json); "
            f"`kohaku index --lake {lake.root}` re-assembles it from the stored rows (nothing is re-embedded)"
        )
    return f"no index in {lake.root}: run `kohaku index --lake {lake.root}` first"
