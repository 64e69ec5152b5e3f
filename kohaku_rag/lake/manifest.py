"""The index's commit point: one manifest names every file search reads.

Everything search reads that is derived from the per-document tables (the vector store,
BM25, the search aids) is written as new, immutable files beside the live ones, and
published by one atomic rename of `index/manifest.json`, which lists each file with its
size, modification time and BLAKE2b checksum, and, per part, the index-rows version of
every document it holds, per-document row counts and (for the vectors) a per-document
digest of the vectors. Readers open only the files one manifest names, so they see a
whole generation or the one before it, never a mix; a file no manifest names is deleted.

The three parts are built by separate steps (the `vector_index`, `bm25_index` and
`search_aids` assets). Each step *stages* its part (`.pending-<part>.json`), and a
generation is published only when every part holds the same documents at the same
versions: a run killed between two steps leaves the last generation in place, and the
next run redoes what is missing. (Lucene's `segments_N` commit points are the model.)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from stat import S_ISREG

from kohaku_rag.errors import IndexUnavailable, KohakuError
from kohaku_rag.lake.damage import recorded_damage

__all__ = [
    "MANIFEST_NAME",
    "PARTS",
    "FileEntry",
    "IndexPart",
    "Manifest",
    "collect_garbage",
    "describe_file",
    "file_problem",
    "new_file",
    "publish_staged",
    "read_manifest",
    "stage",
    "staged_parts",
]

MANIFEST_NAME = "manifest.json"
FORMAT_VERSION = 1
PARTS = ("vectors", "bm25", "aids")
_PENDING = ".pending-{part}.json"
# Files of a generation: <stem>.<12 hex>.<suffix> (new_file); older layouts' fixed names too,
# so a lake indexed before generations is cleaned up once it has a manifest.
_GENERATION_FILE = re.compile(r"^(vectors|bm25|expansions|doc_metadata)(\.[0-9a-f]{12})?\.(sqlite|npz|parquet)$")
_LEFTOVER = re.compile(
    r"^(vectors|bm25|expansions|doc_metadata)\.[0-9a-f]{12}\.(sqlite|npz|parquet)-(journal|wal|shm)$"
)
# What a killed write left: atomic writes' temporaries, a store built beside (older layouts).
_KILLED_WRITE = re.compile(r"^\..+\.(tmp|building|building-wal|building-shm|building-journal)$")


@dataclass(frozen=True)
class FileEntry:
    """One file of a generation: its name in the index folder, size, mtime and checksum."""

    name: str
    size: int
    mtime_ns: int
    blake2b: str


@dataclass(frozen=True)
class IndexPart:
    """One part of a generation (the vectors, BM25 or the search aids).

    `rows_versions`: document -> the version of its index rows this part was built from;
    `counts`: document -> table -> rows (what opening the part checks against its files);
    `digests`: document -> digest of its vectors (the vectors part; `kohaku doctor` checks);
    `record`: facts of this part only (the search mode, the corpus files' hash, ...).
    """

    files: Mapping[str, FileEntry]
    rows_versions: Mapping[str, str]
    counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    digests: Mapping[str, str] = field(default_factory=dict)
    record: Mapping[str, str] = field(default_factory=dict)

    def total(self, table: str) -> int:
        return sum(c.get(table, 0) for c in self.counts.values())


@dataclass(frozen=True)
class Manifest:
    generation: int
    published_at: str
    parts: Mapping[str, IndexPart]

    def path(self, index_dir: Path, part: str, role: str) -> Path | None:
        """The file of `part` in `role` ("vectors", "bm25", "expansions", "doc_metadata")."""
        entry = self.parts[part].files.get(role) if part in self.parts else None
        return index_dir / entry.name if entry is not None else None

    def names(self) -> set[str]:
        return {e.name for p in self.parts.values() for e in p.files.values()}


def read_manifest(index_dir: Path, *, strict: bool = True) -> Manifest | None:
    """The published manifest (None when the index was never published). An unreadable
    manifest raises `IndexUnavailable`, or is None with `strict=False` (the writer: it
    rebuilds every part)."""
    path = Path(index_dir) / MANIFEST_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return _manifest_from(json.loads(raw))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        if not strict:
            return None
        why = str(exc) if isinstance(exc, RefusedEntry) else f"unreadable ({type(exc).__name__})"
        raise IndexUnavailable(
            f"{path}: {why}; `kohaku index` rebuilds the index from the lake's stored rows"
        ) from None


class RefusedEntry(KohakuError, ValueError):
    """A manifest naming something other than a generation file of index/ (a path, a
    device, a file elsewhere): never opened, never trusted."""


def _entry_from(data: dict) -> FileEntry:
    entry = FileEntry(**data)
    if not isinstance(entry.name, str) or not _GENERATION_FILE.match(entry.name):
        raise RefusedEntry(f"names {str(entry.name)[:80]!r}, not a file of index/ (a plain generation file name)")
    return entry


def _manifest_from(data: dict) -> Manifest:
    if data.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"format version {data.get('format_version')!r}")
    return Manifest(
        int(data["generation"]), str(data["published_at"]), {k: _part_from(v) for k, v in data["parts"].items()}
    )


def _part_from(data: dict) -> IndexPart:
    return IndexPart(
        files={role: _entry_from(entry) for role, entry in data["files"].items()},
        rows_versions=dict(data["rows_versions"]),
        counts={d: dict(c) for d, c in data.get("counts", {}).items()},
        digests=dict(data.get("digests", {})),
        record=dict(data.get("record", {})),
    )


def _part_json(part: IndexPart) -> dict:
    return {
        "files": {role: asdict(e) for role, e in part.files.items()},
        "rows_versions": dict(part.rows_versions),
        "counts": {d: dict(c) for d, c in part.counts.items()},
        "digests": dict(part.digests),
        "record": dict(part.record),
    }


def new_file(index_dir: Path, stem: str, suffix: str) -> Path:
    """A fresh name for a file of the next generation (never the name of a live file)."""
    Path(index_dir).mkdir(parents=True, exist_ok=True)
    return Path(index_dir) / f"{stem}.{secrets.token_hex(6)}{suffix}"


def describe_file(path: Path) -> FileEntry:
    """A written file's entry: its size, mtime and BLAKE2b checksum (read once, in chunks)."""
    with open(path, "rb") as f:
        digest = hashlib.file_digest(f, lambda: hashlib.blake2b(digest_size=16)).hexdigest()
        stat = os.fstat(f.fileno())
    return FileEntry(Path(path).name, stat.st_size, stat.st_mtime_ns, digest)


def file_problem(index_dir: Path, entry: FileEntry, *, deep: bool = False) -> str | None:
    """What is wrong with a published file, said of it ("is missing", ...; None: nothing
    found): the caller names the file. Sizes cost nothing and are
    always compared; the checksum is read when `deep`, or when the size or mtime moved since
    publishing (a file no writer touches again should not move)."""
    path = Path(index_dir) / entry.name
    try:
        stat = path.lstat()  # a link is not followed: what the manifest names must be index/'s own file
    except FileNotFoundError:
        return "is missing"
    if not S_ISREG(stat.st_mode):
        return "is not a regular file (a link, a folder or a device): refused"
    if stat.st_size != entry.size:
        return f"is {stat.st_size:,} bytes, {entry.size:,} when it was published"
    recorded = recorded_damage(path)
    if recorded is not None:
        return recorded
    if (deep or stat.st_mtime_ns != entry.mtime_ns) and describe_file(path).blake2b != entry.blake2b:
        return "changed since it was published (its checksum differs)"
    return None


def stage(index_dir: Path, part_name: str, part: IndexPart) -> None:
    """Record a part built for the next generation (published by `publish_staged`)."""
    if part_name not in PARTS:
        raise ValueError(f"unknown index part {part_name!r}")
    _write_json(Path(index_dir) / _PENDING.format(part=part_name), {"part": _part_json(part)})


def staged_parts(index_dir: Path) -> dict[str, IndexPart]:
    """The parts staged and not yet published (a staged record that can't be read is dropped)."""
    found: dict[str, IndexPart] = {}
    for name in PARTS:
        path = Path(index_dir) / _PENDING.format(part=name)
        try:
            found[name] = _part_from(json.loads(path.read_bytes())["part"])
        except FileNotFoundError:
            continue
        except (ValueError, KeyError, TypeError, AttributeError):
            path.unlink(missing_ok=True)
    return found


def publish_staged(index_dir: Path) -> Manifest | None:
    """Publish the staged parts with the live ones as the next generation, when together
    they hold the same documents at the same versions (None: still waiting for a part).
    The caller holds the lake's writer lock."""
    index_dir = Path(index_dir)
    staged = staged_parts(index_dir)
    live = read_manifest(index_dir, strict=False)
    if not staged:
        return live
    parts = {**(live.parts if live is not None else {}), **staged}
    if set(parts) != set(PARTS) or len({_key(p.rows_versions) for p in parts.values()}) != 1:
        return None
    manifest = Manifest((live.generation if live is not None else 0) + 1, datetime.now(UTC).isoformat(), parts)
    data = {"format_version": FORMAT_VERSION, "generation": manifest.generation, "published_at": manifest.published_at}
    _write_json(index_dir / MANIFEST_NAME, {**data, "parts": {k: _part_json(p) for k, p in sorted(parts.items())}})
    for name in staged:
        (index_dir / _PENDING.format(part=name)).unlink(missing_ok=True)
    collect_garbage(index_dir)
    return manifest


def _key(versions: Mapping[str, str]) -> str:
    return json.dumps(sorted(versions.items()))


def collect_garbage(index_dir: Path) -> list[str]:
    """Delete the generation files that neither the manifest nor a staged part names (an
    old generation, or what a killed build left). A reader that still has one open keeps
    reading it: the file goes when it is closed."""
    index_dir = Path(index_dir)
    if not index_dir.is_dir():
        return []
    live = read_manifest(index_dir, strict=False)
    keep = (live.names() if live is not None else set()) | {
        e.name for p in staged_parts(index_dir).values() for e in p.files.values()
    }
    if live is None:
        return []  # never delete files that might be the only index (a lake from before manifests)
    removed = []
    for path in index_dir.iterdir():
        name = path.name
        unnamed = _GENERATION_FILE.match(name) and name not in keep
        if unnamed or _KILLED_WRITE.match(name) or (_LEFTOVER.match(name) and name.rsplit("-", 1)[0] not in keep):
            path.unlink(missing_ok=True)
            removed.append(name)
    return sorted(removed)


def with_files(part: IndexPart, index_dir: Path, files: Mapping[str, Path]) -> IndexPart:
    """`part` naming the given written files (described now)."""
    return replace(part, files={role: describe_file(Path(index_dir) / p.name) for role, p in files.items()})


def _write_json(path: Path, data: dict) -> None:
    """Write then rename: a reader sees the old file or the new, never half of one; fsync'd
    first, so after a crash the rename never points at an empty file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
