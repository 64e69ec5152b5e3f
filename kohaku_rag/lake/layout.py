"""Where each thing of the data lake lives: tables by asset and partition, blobs, caches,
and the files of the published index generation (read from its manifest)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kohaku_rag.lake.manifest import MANIFEST_NAME, read_manifest
from kohaku_rag.lake.tables import check_key

__all__ = ["Lake"]

_PUBLISHED_NAMES: dict[tuple[str, int, int], tuple[str, ...]] = {}


def _file_stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.lstat()  # a file swapped for a link changes the stamp (the manifest refuses links)
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


@dataclass(frozen=True)
class Lake:
    root: Path

    def table(self, asset: str, partition: str | None = None) -> Path:
        name = check_key(partition) if partition is not None else "data"
        return self.root / asset / f"{name}.parquet"

    def partitions(self, asset: str) -> list[str]:
        folder = self.root / asset
        return sorted(p.stem for p in folder.glob("*.parquet")) if folder.exists() else []

    def blob(self, digest: str, suffix: str = ".png") -> Path:
        return self.root / "blobs" / digest[:2] / f"{digest}{suffix}"

    @property
    def cache_dir(self) -> Path:
        return self.root / "cache"

    @property
    def index_dir(self) -> Path:
        return self.root / "index"

    @property
    def manifest_path(self) -> Path:
        """The index's commit point: the files of the published generation (stores/manifest.py)."""
        return self.index_dir / MANIFEST_NAME

    @property
    def vectors_path(self) -> Path:
        """The published vector store (a path that does not exist when none is published)."""
        return self._published("vectors", "vectors", "vectors.sqlite")

    @property
    def bm25_path(self) -> Path:
        """The published BM25 index (a path that does not exist when none is published)."""
        return self._published("bm25", "bm25", "bm25.npz")

    def index_stamp(self) -> tuple[object, ...] | None:
        """Changes whenever a generation is published (the manifest is renamed over, so its
        inode changes) or a file it names is touched: what a long-lived process compares,
        per query, to reopen its index (a few `stat` calls; the manifest is parsed once)."""
        try:
            stat = self.manifest_path.stat()
        except OSError:
            return None
        key = (str(self.manifest_path), stat.st_ino, stat.st_mtime_ns)
        names = _PUBLISHED_NAMES.get(key)
        if names is None:
            manifest = read_manifest(self.index_dir, strict=False)
            names = tuple(sorted(manifest.names())) if manifest is not None else ()
            _PUBLISHED_NAMES.clear()  # one lake per process in practice; never grows
            _PUBLISHED_NAMES[key] = names
        return key[1:] + tuple(_file_stamp(self.index_dir / name) for name in names)

    def _published(self, part: str, role: str, default: str) -> Path:
        manifest = read_manifest(self.index_dir, strict=False)
        path = manifest.path(self.index_dir, part, role) if manifest is not None else None
        return path if path is not None else self.index_dir / default

    @property
    def sources_dir(self) -> Path:
        """Documents fetched from their metadata URL."""
        return self.root / "sources"

    @property
    def index_config_path(self) -> Path:
        """The index settings the lake was built with (written by indexing, read by everyone)."""
        return self.root / "index_config.json"

    @property
    def dagster_home(self) -> Path:
        return self.root / ".dagster"
