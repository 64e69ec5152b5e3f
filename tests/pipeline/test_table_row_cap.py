"""Indexing keeps the first MAX_TABLE_ROWS rows of a table, and says so: a table of
10,000 rows costs what a table of the cap costs, and a line names what was kept."""

from __future__ import annotations

import logging
import time

import pyarrow.parquet as pq
from test_lake_repair import _index, env  # noqa: F401 - the fixture

from kohaku_rag.document.tree import NodeKind, table_to_nodes
from kohaku_rag.indexing import steps as ix
from kohaku_rag.parse.limits import MAX_TABLE_ROWS


def _big_table(rows: int) -> str:
    body = "\n".join(f"| site-{i} | {1000 + i} | 1.{i % 97} |" for i in range(rows))
    return (
        "# Sites\n\n## 1 Usage\n\nTable 1. Water use per site.\n\n| site | liters | PUE |\n|---|---|---|\n"
        f"{body}\n\nThe sites were audited in 2023.\n"
    )


def test_a_10000_row_table_is_cut_at_indexing_with_a_line_saying_what_was_kept(env, capsys, caplog):  # noqa: F811
    """Guards: a document with a 10,000-row table indexes its first MAX_TABLE_ROWS rows
    (not all 10,000), and the log and the stored tree say which table and how many rows."""
    settings, corpus = env
    (corpus / "sites.md").write_text(_big_table(10_000))
    caplog.set_level(logging.WARNING, logger="kohaku")
    started = time.perf_counter()
    status, out = _index(settings, capsys)
    seconds = time.perf_counter() - started
    assert status == 0, out
    line = f"a table in section '1 Usage': kept the first {MAX_TABLE_ROWS:,} of its 10,000 rows"
    assert ix.tables_cut(settings.lake, "sites") == [line]
    assert any(line in r.getMessage() and "sites" in r.getMessage() for r in caplog.records), caplog.text
    nodes = table_to_nodes(pq.read_table(settings.lake.table(ix.TREES, "sites")))
    (table,) = [n.table for n in nodes if n.table is not None]
    assert len(table.rows) == MAX_TABLE_ROWS and table.rows[-1].label == f"site-{MAX_TABLE_ROWS - 1}"
    assert sum(n.kind is NodeKind.SENTENCE for n in nodes) <= MAX_TABLE_ROWS + 3
    assert pq.read_metadata(settings.lake.table(ix.INDEX_ROWS, "sites")).num_rows < MAX_TABLE_ROWS + 20
    print(f"indexed with a 10,000-row table in {seconds:.1f}s")
