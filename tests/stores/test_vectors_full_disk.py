"""sqlite-vec's own words for a full disk ("Could not insert a new vector chunk", SQLite's
"disk is full" lost) are read as a full disk, also once the failed write's files are gone."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from test_index import synthetic_doc, unit_rows

from kohaku_rag.lake.disk_full import disk_full_message, is_disk_full, nearly_full
from kohaku_rag.stores.vectors import VectorStore, remove_store
from tests.support.small_disk import small_disk_at


@pytest.fixture()
def small_disk(tmp_path: Path):
    """A real 8 MB file system (tmpfs); skipped where mounting is not allowed."""
    with small_disk_at(tmp_path, 8) as folder:
        yield folder


def test_sqlite_vecs_failed_chunk_on_a_full_disk_is_a_full_disk(small_disk: Path) -> None:
    """Guards: a new store's first vectors written with 400 kB left fail in sqlite-vec's
    words; with the store removed (as a failed assembly does) the failure is still named a
    full disk, in the one line that says what to free."""
    lake = small_disk / "lake"
    (lake / "index").mkdir(parents=True)
    target = lake / "index" / "vectors.0123456789ab.sqlite"
    store = VectorStore(target, 384, model_id="m")
    spare = small_disk / "spare"  # what the failed write frees once it is cleaned up
    spare.write_bytes(b"\0" * 3 * 2**20)
    with open(small_disk / "filler", "wb") as filler:
        filler.write(b"\0" * (shutil.disk_usage(small_disk).free - 400_000))
    nodes = synthetic_doc("d", 1, 1, 3)
    rng = np.random.default_rng(0)
    with pytest.raises(Exception) as failed:
        store.upsert_document("d", "1", nodes, dict(zip((n.node_id for n in nodes), unit_rows(rng, len(nodes), 384))))
    store.close()
    assert "could not insert a new vector chunk" in str(failed.value).lower()
    remove_store(target)
    spare.unlink()
    assert not nearly_full(lake)  # the disk no longer looks full
    assert is_disk_full(failed.value, lake)
    assert f"the disk holding {lake} is full" in disk_full_message(lake)
    assert not is_disk_full(failed.value)  # without the lake, the words alone prove nothing
