"""A quote is the cited rows of a table, never the whole table: a table of 10,000 rows
cited by an answer gives a quote of at most QUOTE_ROWS rows and QUOTE_CHARS characters,
and its last line says how many rows were left out."""

from __future__ import annotations

from kohaku_rag.document.table_record import TableRecord, TableRow
from kohaku_rag.serving.table_rows import QUOTE_CHARS, QUOTE_ROWS, cut_text, record_quote, table_quote

ROWS = 10_000
CAPTION = "Table 7: Energy per inference request, metered for every model we served."


def big_record() -> TableRecord:
    rows = tuple(TableRow(f"model-{i}", (f"{1000 + i}.5", f"{i % 97}")) for i in range(ROWS))
    return TableRecord("Table 7", CAPTION, "model", ("energy (Wh)", "requests"), rows)


def big_table_text() -> str:
    return "\n".join([CAPTION, *(f"model-{i} | {1000 + i}.5 | {i % 97}" for i in range(ROWS))])


def test_a_computed_value_quotes_the_first_rows_of_a_huge_table_and_says_what_was_cut() -> None:
    """Guards the quote of a value no row states (one computed from several rows): on main
    it was the whole table, 0.3 MB here, sent and stored with every answer citing it."""
    for quote in (record_quote(big_record(), "123456.7"), table_quote(big_table_text(), "123456.7")):
        lines = quote.split("\n")
        assert len(quote) <= QUOTE_CHARS and lines[0] == CAPTION
        assert lines[-1] == f"… {ROWS - (len(lines) - 2 - ('(rows' in lines[1])):,} more rows not quoted", lines[-1]
        assert "model-0" in lines[1] or "model-0" in lines[2]
        assert len(lines) <= QUOTE_ROWS + 3


def test_a_value_many_rows_state_quotes_a_bounded_number_of_them() -> None:
    """Guards a value stated by thousands of rows (every row's "requests" cell holds 5 in
    one row of 97): on main each of them was quoted."""
    stated = sum(1 for i in range(ROWS) if i % 97 == 5)
    for quote in (record_quote(big_record(), "5"), table_quote(big_table_text(), "5")):
        lines = quote.split("\n")
        assert len(quote) <= QUOTE_CHARS and len(lines) == 1 + QUOTE_ROWS + 1
        assert lines[-1] == f"… {stated - QUOTE_ROWS:,} more rows not quoted"


def test_a_small_table_and_a_single_stating_row_are_quoted_whole() -> None:
    """What the bound leaves alone: the stating row of a table, and a small table whole."""
    small = TableRecord(
        "Table 2", "Table 2: Runs.", "run", ("kWh",), (TableRow("A", ("12.5",)), TableRow("B", ("41",)))
    )
    assert record_quote(small, "41") == "Table 2: Runs.\nB · kWh: 41"
    assert record_quote(small, "99") == "Table 2: Runs.\n(rows: run)\nA · kWh: 12.5\nB · kWh: 41"
    assert table_quote("Table 2: Runs.\nA | 12.5\nB | 41", "41") == "Table 2: Runs.\nB | 41"


def test_a_row_or_sentence_longer_than_a_quote_is_cut_with_a_mark() -> None:
    wide = TableRecord("", "", "", tuple(f"c{i}" for i in range(3000)), (TableRow("r", ("9",) * 3000),))
    quote = record_quote(wide, "9")
    assert len(quote) <= QUOTE_CHARS and quote.endswith("…")
    assert cut_text("x" * 50_000) == "x" * (QUOTE_CHARS - 1) + "…"
