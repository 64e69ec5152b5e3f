"""A stored artefact is trusted only when it proves what it holds: a table without its
row count or content checksum is recomputed, and the live index generation's files are
checked against their checksums by every plain `kohaku index`, which rebuilds what fails."""

from __future__ import annotations

import pyarrow.parquet as pq
from test_doctor_repairs import _doctor
from test_lake_repair import _index, _search_docs, env  # noqa: F401 - the fixture

from kohaku_rag.indexing import steps as ix
from kohaku_rag.lake import CONTENT_KEY, ROWS_KEY


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
