"""Answers computed over a table (`table_query = "sql"`): the model writes the query, DuckDB
runs it.

A 1.5B model reads a cell well and counts, compares and picks extremes over many rows badly;
it is a coder model, and SQL is what it writes best. For a question whose wording counts,
compares or takes an extreme ("how many …", "which … the highest", "the difference
between …") and whose context holds a table kept as a record (table_record.py), the
table is loaded as `t` (a `row` column, then one column per named column, numbers as
numbers) and the model is asked for one SELECT over `t`. A single value it returns replaces
the reply's answer_value, and the table's document is cited.

The query sees that table alone: an in-memory DuckDB connection with external access and
extension loading off and the configuration locked (no files, no ATTACH, no INSTALL), a
time limit and a row limit. A query that fails, runs too long or returns no single value
leaves the model's own answer.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import duckdb

from kohaku_rag.answers.normalise import format_number
from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.document.table_record import cell_number
from kohaku_rag.llm.base import ChatRequest, Message
from kohaku_rag.retrieval.context import ContextItem

log = logging.getLogger(__name__)

__all__ = [
    "TableFrame",
    "asks_over_table",
    "query_problem",
    "query_request",
    "run_query",
    "table_frame",
    "value_of",
    "with_query_value",
]

_OVER_TABLE = re.compile(
    r"\b(how many|which|what (?:is|was|were) the (?:highest|lowest|largest|smallest|maximum|minimum)|"
    r"highest|lowest|largest|smallest|maximum|minimum|most|least|difference between|total|sum of|average|"
    r"combined|rank)\b",
    re.IGNORECASE,
)
_SQL = re.compile(r"(select\b.*)", re.IGNORECASE | re.DOTALL)
TIME_LIMIT_S = 2.0
MEMORY_LIMIT = "256MB"  # DuckDB's buffer memory; query_problem keeps out what allocates outside it
MAX_ROWS = 50
MAX_TABLE_ROWS = 200


@dataclass(frozen=True)
class TableFrame:
    """A context table as rows of named cells: its item, its column names and its rows."""

    item: ContextItem
    columns: tuple[str, ...]
    rows: tuple[tuple[str, dict[str, str]], ...]  # (row label, {column: cell})


def asks_over_table(question: Question) -> bool:
    """Whether the wording counts, compares or takes an extreme (never a file's flags)."""
    return _OVER_TABLE.search(question.question) is not None


def table_frame(item: ContextItem) -> TableFrame | None:
    """The table of a context item kept as a record (its rows as the prompt showed them);
    None when the item holds no record or too little of one to query."""
    table = item.table
    if table is None or len(table.rows) < 2 or not any(table.columns):
        return None
    columns = tuple(dict.fromkeys(c for c in table.columns if c))
    rows = tuple(
        (row.label, {c: cell for c, cell in zip(table.columns, row.cells, strict=True) if c and cell})
        for row in table.rows[:MAX_TABLE_ROWS]
    )
    return TableFrame(item, columns, rows)


def _sql_names(columns: Sequence[str]) -> list[str]:
    """A plain lowercase identifier per column, unique ("GPU Power Usage (kWh)" -> gpu_power_usage_kwh)."""
    out: list[str] = []
    for name in columns:
        base = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "col"
        if base[0].isdigit():
            base = f"c_{base}"
        ident, n = base, 2
        while ident in out or ident == "row":
            ident, n = f"{base}_{n}", n + 1
        out.append(ident)
    return out


def _schema(frame: TableFrame) -> tuple[list[str], list[str]]:
    """(identifier, DuckDB type) per column: DOUBLE where every filled cell is a number."""
    names = _sql_names(frame.columns)
    types = []
    for col in frame.columns:
        cells = [cells[col] for _label, cells in frame.rows if cells.get(col)]
        types.append("DOUBLE" if cells and all(cell_number(c) is not None for c in cells) else "VARCHAR")
    return names, types


def query_request(question: Question, frame: TableFrame) -> ChatRequest:
    """One SELECT over `t`, asked with the table's columns (and what each was called) and rows."""
    names, types = _schema(frame)
    cols = "\n".join(f"  {n} {t}  -- {c}" for n, t, c in zip(names, types, frame.columns, strict=True))
    sample = "\n".join(
        "  " + " | ".join([label, *(cells.get(c, "") for c in frame.columns)]) for label, cells in frame.rows[:40]
    )
    user = (
        f"Table t ({frame.item.text.split(chr(10))[0][:160]}):\n  row VARCHAR  -- the row's label\n{cols}\n"
        f"Rows (row | {' | '.join(names)}):\n{sample}\n\n"
        f"Write one DuckDB SQL SELECT over t that answers: {question.question}\n"
        "Return a single value. Reply with the SQL only."
    )
    system = "You write SQL for DuckDB. Reply with one SELECT statement and nothing else."
    return ChatRequest(messages=(Message("system", system), Message("user", user)), max_tokens=120)


def _typed(cells: dict[str, str], columns: Sequence[str], types: Sequence[str]) -> list[object]:
    return [
        cell_number(cells.get(c, "")) if t == "DOUBLE" else cells.get(c) for c, t in zip(columns, types, strict=True)
    ]


# What a query may call: aggregates, arithmetic and matching over the table's cells. Nothing
# that makes a value of its own (repeat, a setting, a file), so its result comes from `t`.
ALLOWED_FUNCTIONS = frozenset(
    {"count", "count_star", "sum", "avg", "mean", "median", "min", "max", "arg_max", "arg_min", "argmax",
     "argmin", "abs", "round", "floor", "ceil", "+", "-", "*", "/", "//", "%", "~~", "!~~", "~~*", "!~~*",
     "lower", "upper", "trim", "coalesce", "nullif"}
)  # fmt: skip
MAX_VALUE_CHARS = 200


def _walk(node: object) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def query_problem(statement: str) -> str | None:
    """Why a statement may not run over the table (None: it may): one SELECT, reading table
    `t` alone, calling only ALLOWED_FUNCTIONS, and reading at least one of its columns (or
    counting its rows), so its value is made from the table, not typed into the query."""
    con = duckdb.connect(":memory:", config={"enable_external_access": False, "autoload_known_extensions": False})
    try:
        (serialized,) = con.execute("SELECT json_serialize_sql(?)", [statement]).fetchone() or ("{}",)
        tree = json.loads(serialized)
    except duckdb.Error as exc:
        return f"not read as SQL ({exc})"
    finally:
        con.close()
    if tree.get("error"):
        return f"not a SELECT ({tree.get('error_message', 'unreadable')})"
    if len(tree.get("statements", [])) != 1:
        return "not one statement"
    nodes = list(_walk(tree["statements"]))
    tables = {n.get("table_name") for n in nodes if n.get("type") == "BASE_TABLE"}
    if tables != {"t"}:
        return f"reads {sorted(str(x) for x in tables) or 'no table'}, not t alone"
    calls = {str(n.get("function_name")).lower() for n in nodes if n.get("class") == "FUNCTION"}
    if calls - ALLOWED_FUNCTIONS:
        return f"calls {sorted(calls - ALLOWED_FUNCTIONS)}"
    if not any(n.get("class") == "COLUMN_REF" for n in nodes) and "count_star" not in calls:
        return "reads no column of t"
    return None


def _from_table(value: object, frame: TableFrame) -> bool:
    """A text value must be a row label or a cell of the table (numbers are checked by the
    query's shape: they are computed from cells)."""
    if isinstance(value, int | float) or value is None:
        return True
    text = str(value).strip()
    cells = {label.strip() for label, _ in frame.rows} | {c.strip() for _, cs in frame.rows for c in cs.values()}
    return len(text) <= MAX_VALUE_CHARS and text in cells


def run_query(sql: str, frame: TableFrame) -> list[tuple[object, ...]] | None:
    """The query's rows over the table alone (None when it fails, runs too long, may not run
    (`query_problem`) or returns text that is not the table's)."""
    found = _SQL.search(sql.replace("```sql", "").replace("```", ""))
    if found is None:
        return None
    statement = found.group(1).strip().rstrip(";").split(";")[0]
    problem = query_problem(statement)
    if problem is not None:
        log.info("table query refused: %s", problem)
        return None
    names, types = _schema(frame)
    con = duckdb.connect(
        ":memory:",
        config={
            "enable_external_access": False,
            "autoload_known_extensions": False,
            "threads": 1,
            "memory_limit": MEMORY_LIMIT,
            "max_temp_directory_size": "0B",
        },
    )
    try:
        cols = ", ".join(["row VARCHAR", *(f"{n} {t}" for n, t in zip(names, types, strict=True))])
        con.execute(f"CREATE TABLE t ({cols})")
        values = [[label, *_typed(cells, frame.columns, types)] for label, cells in frame.rows]
        con.executemany(f"INSERT INTO t VALUES ({', '.join('?' * (len(names) + 1))})", values)
        con.execute("SET lock_configuration = true")
        timer = threading.Timer(TIME_LIMIT_S, con.interrupt)
        timer.start()
        try:
            rows = con.execute(statement).fetchmany(MAX_ROWS)
        finally:
            timer.cancel()
        if not all(_from_table(v, frame) for r in rows for v in r):
            return None
        return [tuple(r) for r in rows]
    except duckdb.Error:
        return None
    finally:
        con.close()


def value_of(rows: list[tuple[object, ...]] | None) -> str | None:
    """The single value a query returned, as an answer_value (None: none, or several)."""
    if not rows or len(rows) != 1 or len(rows[0]) != 1 or rows[0][0] is None:
        return None
    value = rows[0][0]
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return format_number(Decimal(f"{float(value):.6g}"))
    text = str(value).strip()
    return text or None


def with_query_value(answer: Answer, value: str, frame: TableFrame) -> Answer:
    """The answer with the query's value, citing the table's document."""
    refs = (frame.item.doc_id, *(r for r in answer.ref_id if r != frame.item.doc_id))
    return replace(
        answer,
        answer_value=value,
        answer=f"{value} {answer.answer_unit}".strip() if answer.answer_unit != "is_blank" else value,
        ref_id=refs,
        is_blank=False,
    )
