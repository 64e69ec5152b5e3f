"""A persistent embedding cache in front of any Embedder.

Keyed by content, never by path: sha256 over (model_id, role, sha256(text)), so a renamed
document reuses its vectors and any change of model or setting (which `model_id` names)
misses. An image (a multimodal embedder's figure) is keyed the same way by its own sha256,
the figure's lake hash, under the role "image": a figure moved to another document, or
the same figure in two, is embedded once per model and width.

Storage is one SQLite file (WAL, via apsw): rows are looked up by primary key in
chunks, writes are transactions, and two processes may share the file — SQLite's locking
serialises their writes and a busy timeout waits out the other writer.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar, cast

import apsw
import numpy as np

from kohaku_rag.embed.base import Embedder, Role, check_images, check_texts, image_embedder
from kohaku_rag.lake.sqlite_wal import use_wal

T = TypeVar("T", str, bytes)

CACHE_FILE = "embeddings.sqlite"
LOOKUP_CHUNK = 900  # keys per SELECT ... IN (...), well under SQLite's variable limit
BUSY_TIMEOUT_MS = 60_000

# A rowid table on 16 KiB pages: ~1.5 KB vectors pack ten to a page. (WITHOUT ROWID, or
# 4 KiB pages, measured 3-10x slower to write and up to 3x larger for rows this size.)
PAGE_SIZE = 16384
_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    key BLOB PRIMARY KEY,  -- sha256(model_id, role, sha256(text))
    vec BLOB NOT NULL      -- little-endian float32, already L2-normalised
);
"""


def cache_key(model_id: str, role: str, text: str) -> bytes:
    return _key(model_id, role, hashlib.sha256(text.encode("utf-8")).digest())


def image_cache_key(model_id: str, image: bytes) -> bytes:
    """The key of an image's vector: model (with its width) and the image's sha256."""
    return _key(model_id, IMAGE_ROLE, hashlib.sha256(image).digest())


IMAGE_ROLE = "image"  # never a text role (check_texts refuses it), so keys cannot collide


def _key(model_id: str, role: str, content_hash: bytes) -> bytes:
    # NUL separators: neither a model id nor a role contains one, so fields cannot blur.
    return hashlib.sha256(f"{model_id}\x00{role}\x00".encode() + content_hash).digest()


class CachedEmbedder:
    """An Embedder that asks `inner` only for texts it has not seen under the same key.

    `hits` / `misses` count distinct texts per call served from the file / sent to
    `inner`, summed over the life of this object. Misses are embedded `write_chunk` at a
    time and committed after each chunk, so a crash keeps the work already done.
    """

    def __init__(self, inner: Embedder, cache_dir: Path, *, write_chunk: int = 2048) -> None:
        if write_chunk < 1:
            raise ValueError(f"write_chunk must be at least 1, got {write_chunk}")
        self.inner = inner
        self.path = Path(cache_dir) / CACHE_FILE
        self.write_chunk = write_chunk
        self.hits = 0
        self.misses = 0
        self._conn: apsw.Connection | None = None
        self._conn_pid = -1
        # one connection, used by one thread at a time: a server answers several questions
        # at once in worker threads, and apsw refuses a connection busy in another thread
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, path={str(self.path)!r})"

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def embeds_images(self) -> bool:
        return image_embedder(self.inner) is not None

    def embed(self, texts: Sequence[str], *, role: Role = "passage") -> np.ndarray:
        texts = check_texts(texts, role)
        if not texts:
            return self.inner.embed([], role=role)
        model_id = self.inner.model_id
        keys = [cache_key(model_id, role, t) for t in texts]
        return self._cached(keys, texts, lambda batch: self.inner.embed(batch, role=role))

    def embed_images(self, images: Sequence[bytes]) -> np.ndarray:
        """`inner.embed_images` for the images not cached under this model and width; each
        chunk is stored as soon as it is embedded, so a failure later keeps those."""
        inner = image_embedder(self.inner)
        if inner is None:
            raise ValueError(f"{self.inner!r} does not embed images")
        items = check_images(images)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        keys = [image_cache_key(self.inner.model_id, image) for image in items]
        return self._cached(keys, items, inner.embed_images)

    def _cached(self, keys: list[bytes], items: Sequence[T], embed: Callable[[list[T]], np.ndarray]) -> np.ndarray:
        """Rows for `items` (one key each): found in the file, or embedded and stored."""
        model_id = self.inner.model_id
        unique: dict[bytes, T] = dict(zip(keys, items))  # identical items share one key
        found = self._lookup(list(unique))
        missing = [k for k in unique if k not in found]
        self.hits += len(unique) - len(missing)
        self.misses += len(missing)
        for chunk in _chunks(missing, self.write_chunk):
            vectors = np.asarray(embed([unique[k] for k in chunk]), dtype=np.float32)
            self._store(chunk, vectors)
            found.update(zip(chunk, vectors))
        widths = {v.shape[0] for v in found.values()}
        if len(widths) != 1:
            raise ValueError(
                f"{self.path}: cached vectors for {model_id!r} have widths {sorted(widths)}; "
                "delete the cache file if the model changed without a new model_id"
            )
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)

    def __len__(self) -> int:
        """Entries in the file, over every model."""
        with self._lock:
            ((count,),) = self._connection().execute("SELECT count(*) FROM embeddings").fetchall()
        return int(cast(int, count))

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _connection(self) -> apsw.Connection:
        # A forked worker must not reuse its parent's SQLite handle; open its own.
        if self._conn is None or self._conn_pid != os.getpid():
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = apsw.Connection(str(self.path))
            conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # takes effect only on a new file
            use_wal(conn.execute, BUSY_TIMEOUT_MS / 1000)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(_SCHEMA)
            self._conn, self._conn_pid = conn, os.getpid()
        return self._conn

    def _lookup(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        found: dict[bytes, np.ndarray] = {}
        with self._lock:
            conn = self._connection()
            for chunk in _chunks(keys, LOOKUP_CHUNK):
                marks = ",".join("?" * len(chunk))
                for key, blob in conn.execute(f"SELECT key, vec FROM embeddings WHERE key IN ({marks})", chunk):
                    found[bytes(key)] = np.frombuffer(blob, dtype="<f4")
        return found

    def _store(self, keys: list[bytes], vectors: np.ndarray) -> None:
        if vectors.shape[0] != len(keys):
            raise ValueError(f"{self.inner!r} returned {vectors.shape[0]} vectors for {len(keys)} texts")
        rows = [(k, v.astype("<f4").tobytes()) for k, v in zip(keys, vectors)]
        with self._lock:
            conn = self._connection()
            with conn:  # one transaction per chunk
                conn.executemany("INSERT OR REPLACE INTO embeddings(key, vec) VALUES (?, ?)", rows)


def _chunks(items: list[bytes], size: int) -> Iterator[list[bytes]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
