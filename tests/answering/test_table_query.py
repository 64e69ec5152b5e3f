"""table_query = "sql": a context table loaded into DuckDB alone, the model's SELECT run with
no file, network or extension access and a time limit, a single value read back."""

from __future__ import annotations

import time

from kohaku_rag.answering.table_query import asks_over_table, query_request, run_query, table_frame, value_of
from kohaku_rag.answers.records import Question
from kohaku_rag.document.table_record import GROUP_SEP, TableRecord, TableRow, table_text
from kohaku_rag.retrieval.context import ContextItem

RECORD = TableRecord(
    label="Table 2",
    caption="Table 2. Mean and standard deviation of energy per 1,000 queries.",
    label_header="task",
    columns=(f"inference energy (kWh){GROUP_SEP}mean", f"inference energy (kWh){GROUP_SEP}std"),
    rows=(
        TableRow("text classification", ("0.002", "0.001")),
        TableRow("text generation", ("0.047", "0.03")),
        TableRow("image generation", ("2.907", "3.31")),
    ),
)


def frame():  # noqa: ANN201
    item = ContextItem(
        "luccioni2024", "luccioni2024:sec1:p2", "paragraph", 6, 1.0, table_text(RECORD), "table", table=RECORD
    )
    found = table_frame(item)
    assert found is not None
    return found


def test_a_table_without_a_record_is_not_queried() -> None:
    item = ContextItem("d", "d:sec1:p2", "paragraph", 6, 1.0, table_text(RECORD), "table")
    assert table_frame(item) is None  # its text is never parsed back into a table


def test_a_table_record_becomes_named_typed_columns() -> None:
    f = frame()
    assert f.columns == (f"inference energy (kWh){GROUP_SEP}mean", f"inference energy (kWh){GROUP_SEP}std")
    assert f.rows[1] == ("text generation", {f.columns[0]: "0.047", f.columns[1]: "0.03"})
    prompt = query_request(Question("q", "Which task uses the most energy?", "is_blank"), f).messages[1].content
    assert "inference_energy_kwh_mean DOUBLE  -- inference energy (kWh) · mean" in prompt
    assert "text generation | 0.047 | 0.03" in prompt


def test_a_query_answers_a_count_or_an_extreme() -> None:
    f = frame()
    assert value_of(
        run_query("```sql\nSELECT row FROM t ORDER BY inference_energy_kwh_mean DESC LIMIT 1;\n```", f)
    ) == ("image generation")
    assert value_of(run_query("SELECT count(*) FROM t WHERE inference_energy_kwh_std > 0.01", f)) == "2"
    assert (
        value_of(run_query("SELECT max(inference_energy_kwh_std) - min(inference_energy_kwh_std) FROM t", f)) == "3.309"
    )
    assert value_of(run_query("SELECT row FROM t", f)) is None  # several values: the reply's own stands


def test_the_query_sees_the_table_alone_and_is_cut_off() -> None:
    f = frame()
    assert run_query("SELECT * FROM read_csv('/etc/passwd')", f) is None
    assert run_query("SELECT * FROM 'https://example.com/x.parquet'", f) is None
    assert run_query("SELECT count(*) FROM t; INSTALL httpfs; LOAD httpfs", f) == [(3,)]  # the first statement alone
    assert run_query("DROP TABLE t", f) is None  # not a SELECT
    started = time.perf_counter()
    joined = ", ".join(f"t t{k}" for k in range(24))  # 3^24 rows
    assert run_query(f"SELECT count(*) FROM {joined}", f) is None
    assert time.perf_counter() - started < 10


def test_only_questions_that_count_compare_or_pick_an_extreme() -> None:
    assert asks_over_table(Question("q", "Which task used the most energy per query?", "kWh"))
    assert asks_over_table(Question("q", "How many models emit more than 10 g?", "models"))
    assert not asks_over_table(Question("q", "What was the PUE of the data center?", "PUE"))


def test_a_value_the_query_typed_itself_is_refused() -> None:
    """A query that types its own value (a constant, a string, a DuckDB setting) is refused: no
    such value is cited to the table's document, and no huge string is built in memory."""
    f = frame()
    for typed in (
        "SELECT 50000000000000",
        "SELECT 50000000000000 FROM t",
        "SELECT 'see http://evil.example/login' FROM t",
        "SELECT current_setting('allowed_directories')",
        "SELECT repeat('x', 1500000000) FROM t",
        "SELECT max(length(repeat(row, 100000000))) FROM t",
        "SELECT row || ' http://evil.example' FROM t LIMIT 1",
    ):
        assert run_query(typed, f) is None, typed
    # Reading and computing over the table's cells still answers.
    assert value_of(run_query("SELECT max(inference_energy_kwh_mean) / min(inference_energy_kwh_mean) FROM t", f))
    assert value_of(run_query("SELECT row FROM t WHERE inference_energy_kwh_std > 3", f)) == "image generation"
