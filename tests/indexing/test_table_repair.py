"""A text table the parser leaves unaligned is repaired by a model at index time and kept
only when the code can check the repair: every cell a run of the table's own tokens in
order, a consistent shape, no number the text lacks. It runs as its own per-document asset
after the tree: search works from the first pass, the tree reads the accepted repairs at its
next build, and a document whose text did not change is never asked again.

The repairing model is a real OpenAI-compatible HTTP server on 127.0.0.1 (tests/support)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kohaku_rag.indexing.table_repair import verify_repair
from kohaku_rag.parse.text_tables import TextTable, split_tables
from tests.support.chat_server import ChatServer

LINES = """We measured the energy of each model on the same cluster over a full week of serving traffic.
Table 3: Energy and emissions of the models we measured.
Model Training Energy Inference Energy Peak Memory
BERT-base 1.5 0.7 12.1
GPT-2 XL 27.0 11.3 40.2
T5-large 9.8 4.1 18.0
The larger models used more energy per query in every setting we tried this week.""".splitlines()

FAITHFUL = {
    "columns": ["Training Energy", "Inference Energy", "Peak Memory"],
    "rows": [
        {"label": "BERT-base", "cells": ["1.5", "0.7", "12.1"]},
        {"label": "GPT-2 XL", "cells": ["27.0", "11.3", "40.2"]},
        {"label": "T5-large", "cells": ["9.8", "4.1", "18.0"]},
    ],
}


def block() -> TextTable:
    (found,) = split_tables(LINES)
    assert found.record is None  # the parser cannot align it: six header words, three cells
    return found


def test_a_faithful_repair_is_accepted_as_a_record() -> None:
    record = verify_repair(block(), FAITHFUL)
    assert not isinstance(record, str), record
    assert record.label == "Table 3" and record.columns == ("Training Energy", "Inference Energy", "Peak Memory")
    assert [(r.label, r.cells) for r in record.rows][1] == ("GPT-2 XL", ("27.0", "11.3", "40.2"))


def test_a_repair_listing_the_row_names_column_with_the_columns_is_read_as_such() -> None:
    """The bundled model often lists the row-label column ("Model") among the columns, every
    row then one cell short: that first name is the row names' column, not a shape error."""
    data = json.loads(json.dumps(FAITHFUL))
    data["columns"].insert(0, "Model")
    record = verify_repair(block(), data)
    assert not isinstance(record, str), record
    assert record.label_header == "Model" and record.columns == tuple(FAITHFUL["columns"])


def test_a_table_printed_column_by_column_is_checked_in_that_order() -> None:
    lines = [
        "Table 4: Latency of the two servers.",
        "Server",
        "A100",
        "H100",
        "Latency (ms)",
        "41.5",
        "22.0",
    ]
    column_major = TextTable(0, len(lines), None, lines[0], tuple(lines))
    data = {
        "columns": ["Latency (ms)"],
        "rows": [{"label": "A100", "cells": ["41.5"]}, {"label": "H100", "cells": ["22.0"]}],
    }
    assert not isinstance(verify_repair(column_major, data), str)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda d: d["rows"][1]["cells"].__setitem__(0, "27.5"), "not copied"),  # an invented number
        (lambda d: d["rows"][1]["cells"].__setitem__(0, "11.3"), "order"),  # a cell from the next column
        (lambda d: d["rows"][0].__setitem__("label", "BERT base model"), "not copied"),  # a reworded label
        (lambda d: d["columns"].__setitem__(0, "Energy (kWh)"), "column name"),  # a unit the text lacks
        (lambda d: d["rows"][2]["cells"].pop(), "2 cells for 3 columns"),  # a broken shape
        (lambda d: d.__setitem__("rows", d["rows"][:2]), "keep 7 of the table's 11 numbers"),  # a dropped row
    ],
)
def test_a_repair_the_text_does_not_bear_out_is_refused(change, why) -> None:  # noqa: ANN001
    data = json.loads(json.dumps(FAITHFUL))
    change(data)
    refused = verify_repair(block(), data)
    assert isinstance(refused, str) and why in refused, refused


class RepairingServer(ChatServer):
    """Answers every repair request with one fixed reply."""

    reply = json.dumps(FAITHFUL)

    def _echo(self, body, messages, key):  # noqa: ANN001 - the base class's hook
        return self.reply


def repairing_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: ChatServer):  # noqa: ANN201
    """A corpus of the one text document, indexed with table repairs by `server`'s model."""
    from kohaku_assets.resources import KohakuSettings

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "lake" / ".dagster"))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "energy.txt").write_text("\n".join(LINES) + "\n", encoding="utf-8")
    cfg = tmp_path / "index.json"
    llm = {"backend": "openai", "model": "scripted", "base_url": server.base_url, "api_key_env": None,
           "max_retries": 0}  # fmt: skip
    cfg.write_text(json.dumps({"table_repair": True, "table_repair_llm": llm}))
    return KohakuSettings(lake_root=str(tmp_path / "lake"), corpus_dir=str(corpus), index_config_file=str(cfg))


def test_the_index_repairs_the_table_then_rebuilds_its_document_and_asks_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unaligned table a model repairs faithfully becomes a table record; its document is
    rebuilt once, and the model is asked once."""
    from kohaku_assets.runner import embedder_for, run_index
    from kohaku_rag.indexing.steps import read_tree
    from kohaku_rag.indexing.table_repair import read_repairs
    from kohaku_rag.retrieval.retriever import open_vector_store

    with RepairingServer() as server:
        settings = repairing_settings(tmp_path, monkeypatch, server)
        lines: list[str] = []
        first = run_index(settings, progress=lines.append)
        assert first.recomputed == ["energy"] and not first.failed
        assert len(server.requests) == 1
        assert any("re-indexing them: energy" in line for line in lines), lines
        (repair,) = read_repairs(settings.lake, "energy").values()
        assert repair.record is not None and repair.reason == ""
        tables = [n for n in read_tree(settings.lake, "energy") if n.table is not None]
        assert [t.table.rows[1].cells for t in tables if t.table] == [("27.0", "11.3", "40.2")]
        with open_vector_store(settings.lake, embedder_for(settings)) as store:
            (stored,) = [n for n in store.get_nodes([tables[0].node_id]).values()]
        assert stored.table is not None and stored.table.columns == (
            "Training Energy",
            "Inference Energy",
            "Peak Memory",
        )
        # Nothing changed: nothing is asked or rebuilt.
        second = run_index(settings, progress=lambda _m: None)
        assert second.recomputed == [] and len(server.requests) == 1


def test_a_refused_repair_leaves_the_table_as_text_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kohaku_assets.runner import run_index
    from kohaku_rag.indexing.steps import read_tree
    from kohaku_rag.indexing.table_repair import read_repairs

    invented = json.loads(json.dumps(FAITHFUL))
    invented["rows"][0]["cells"][0] = "1.6"
    with RepairingServer() as server:
        server.reply = json.dumps(invented)
        settings = repairing_settings(tmp_path, monkeypatch, server)
        assert run_index(settings, progress=lambda _m: None).recomputed == ["energy"]
        (repair,) = read_repairs(settings.lake, "energy").values()
        assert repair.record is None and "'1.6'" in repair.reason
        assert not [n for n in read_tree(settings.lake, "energy") if n.table is not None]
        assert len(server.requests) == 1
        run_index(settings, progress=lambda _m: None)
        assert len(server.requests) == 1  # refused once, not asked again until something changes
