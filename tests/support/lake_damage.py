"""Damage the cheap checks can't see: bytes of a published index file changed with its
size and mtime put back (`touch -r`)."""

from __future__ import annotations

import os
from pathlib import Path

import apsw
import numpy as np
import sqlite_vec


def rewrite_vectors_in_place(store: Path, seed: int = 7) -> None:
    """Every paragraph vector of the store replaced by another unit vector (SQLite's
    structure intact), its size and mtime put back."""
    stat = store.stat()
    conn = apsw.Connection(str(store))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    rng = np.random.default_rng(seed)
    dim = int(conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchall()[0][0])
    for (rowid,) in conn.execute("SELECT id FROM nodes WHERE kind = 'paragraph'").fetchall():
        vec = rng.standard_normal(dim).astype(np.float32)
        unit = (vec / np.linalg.norm(vec)).tobytes()
        conn.execute("UPDATE vec_paragraph SET embedding = ? WHERE id = ?", (unit, rowid))
    conn.close()
    for suffix in ("-wal", "-shm"):
        store.with_name(store.name + suffix).unlink(missing_ok=True)
    assert store.stat().st_size == stat.st_size
    os.utime(store, ns=(stat.st_atime_ns, stat.st_mtime_ns))
