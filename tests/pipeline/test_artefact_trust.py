"""A stored artefact is trusted only when it proves what it holds: a table without its
row count or content checksum is recomputed, and the live index generation's files are
checked against their checksums by every plain `kohaku index`, which rebuilds what fails."""

from __future__ import annotations

import json
import os
import shutil

import pyarrow.parquet as pq
import pytest
from test_doctor_repairs import _doctor
from test_lake_repair import QUESTION, _cli, _index, _search_docs, env  # noqa: F401 - the fixture

from kohaku_rag.indexing import steps as ix
from kohaku_rag.lake.tables import CONTENT_KEY, ROWS_KEY
from tests.support.lake_damage import rewrite_vectors_in_place


def _strip_proof(path, keep_rows: int) -> int:
    """The table cut to `keep_rows` rows and written back with its other metadata (its
    version) but without its row count and checksum; returns the rows it had."""
    table = pq.read_table(path)
    meta = {
        k: v for k, v in (table.schema.metadata or {}).items() if k not in (ROWS_KEY.encode(), CONTENT_KEY.encode())
    }
    pq.write_table(table.slice(0, keep_rows).replace_schema_metadata(meta), path)
    return table.num_rows


def test_a_table_without_its_row_count_and_checksum_is_recomputed(env, capsys):  # noqa: F811
    """Guards: index rows stripped of their count and checksum (and cut short) are named by
    doctor and recomputed by a plain `kohaku index`, never indexed as they are."""
    settings, _ = env
    assert _index(settings, capsys)[0] == 0
    before = _search_docs(settings, capsys)
    path = settings.lake.table(ix.INDEX_ROWS, "gpu")
    whole = _strip_proof(path, keep_rows=pq.read_metadata(path).num_rows // 2)
    status, out = _doctor(settings, capsys)
    assert status == 1 and "gpu.parquet" in out and "row count" in out, out
    status, out = _index(settings, capsys)
    assert status == 0 and "Traceback" not in out, out
    assert pq.read_table(path).num_rows == whole
    assert ROWS_KEY.encode() in pq.read_schema(path).metadata
    assert _doctor(settings, capsys)[0] == 0
    assert _search_docs(settings, capsys) == before


def _older_generation_over_live(settings, corpus, capsys) -> None:
    """The vector store of the generation before copied over the live one, cut or padded
    to the live size, its mtime put back: the cheap size+mtime check passes."""
    older = settings.lake.root.parent / "older-vectors.sqlite"
    shutil.copyfile(settings.lake.vectors_path, older)
    water = corpus / "water.md"
    water.write_text(water.read_text().replace("0.18 liters", "0.25 liters"))  # same rows, new text
    assert _index(settings, capsys)[0] == 0
    live = settings.lake.vectors_path
    stat = live.stat()
    data = older.read_bytes()[: stat.st_size]
    live.write_bytes(data + b"\0" * (stat.st_size - len(data)))
    os.utime(live, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _vectors_rewritten(settings, _corpus, _capsys) -> None:
    rewrite_vectors_in_place(settings.lake.vectors_path)


def _search_json(settings, capsys) -> list[dict]:
    capsys.readouterr()
    assert _cli(settings, "search", QUESTION, "--json") == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("damage", [_vectors_rewritten, _older_generation_over_live])
def test_a_plain_index_finds_changed_bytes_of_the_live_generation_and_rebuilds(env, capsys, damage):  # noqa: F811
    """Guards: the live vector store's bytes changed with its size and mtime kept are found
    by a plain `kohaku index` (no doctor first), which rebuilds the store; search then
    answers as before the damage."""
    settings, corpus = env
    assert _index(settings, capsys)[0] == 0
    damage(settings, corpus, capsys)
    status, out = _index(settings, capsys)
    assert status == 0 and "rebuilding the vector index" in out and "checksum" in out, out
    assert _doctor(settings, capsys)[0] == 0
    after = _search_json(settings, capsys)
    for suffix in ("", "-wal", "-shm"):  # a clean rebuild of the same rows answers the same
        settings.lake.vectors_path.with_name(settings.lake.vectors_path.name + suffix).unlink(missing_ok=True)
    assert _index(settings, capsys)[0] == 0
    assert after == _search_json(settings, capsys)
