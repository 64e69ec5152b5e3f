"""Answers read from a table's cells (`table_cells = "named"`): the model names the cell, the
code reads it.

A 1.5B model reading a table takes a neighbouring number, a citation number printed beside
the value, or the next column's cell; it converts MWh to kWh and divides two cells badly.
It picks a row and a column by name well. So, when the context holds a table kept as a
record, the reply's schema offers:

* `cells`: up to two cells, each a `row` and a `column` chosen from the context tables' own
  names (JSON-schema enums: the model cannot name a row that does not exist);
* `cell_math`: how the answer follows from them ("a", "a / b", "(a - b) / b * 100", ...),
  chosen from a fixed list.

The code then reads each cell from the record, puts it in the question's unit (the column's
header names its unit: "Energy (MWh)"), computes (compute.py's evaluator) and the result
replaces the value the model typed. The value the model typed is used only where it names no
cell, or a named cell holds no number. The working is kept with the prediction like a
computed answer's, each operand naming its cell ("Table 2 · text generation · mean"), so the
card and `kohaku explain` show the cells used.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kohaku_rag.answering.compute import ComputeError, Operand, Working, in_units, safe_eval, significant
from kohaku_rag.answering.prompt import ReplyFields, enum_spelling, is_true_false, unit_is_given
from kohaku_rag.answering.qa_config import GenerationPart
from kohaku_rag.answers.answer_forms import asks_for_several
from kohaku_rag.answers.records import Question
from kohaku_rag.document.table_record import GROUP_SEP, TableRecord, cell_number, cell_unit, row_names
from kohaku_rag.retrieval.context import ContextItem

__all__ = [
    "CELL_MATH",
    "CELLS_RULE",
    "NamedRow",
    "cells_schema",
    "named_rows",
    "read_cells",
    "reply_fields",
    "table_items",
]

MAX_CELLS = 2
# A cell read as it is keeps its digits ("204,592,592"); float noise past 10 digits is cut.
CELL_DIGITS = 10
# The computations a reply may choose; "a" is the cell itself. A fixed list, so the reply
# cannot write an expression that reads no cell.
CELL_MATH = (
    "a",
    "a + b",
    "a - b",
    "b - a",
    "a / b",
    "b / a",
    "a * b",
    "a / b * 100",
    "(a - b) / b * 100",
    "(b - a) / a * 100",
)
CELLS_RULE = (
    "cells: if the answer is in a table, the cell(s) holding it, each by its row and column "
    "(the first is a, the second b); [] if it is not in a table. "
    'cell_math: the answer from a and b ("a" when it is the cell itself).'
)
# `table_cells = "required"`: the reply must name a cell when the context holds a table (the
# bundled model left `cells` empty whenever it could).
REQUIRED_RULE = (
    "cells: the table cell(s) the answer is read from, each by its row and column (the first is a, "
    'the second b). cell_math: the answer from a and b ("a" when it is the cell itself).'
)


@dataclass(frozen=True)
class NamedRow:
    """A row as the reply names it ("Table 2: text generation"), and where it is."""

    key: str
    item: ContextItem
    row: int


def table_items(items: Sequence[ContextItem]) -> list[ContextItem]:
    """The context's tables kept as records, with rows and named columns."""
    return [i for i in items if i.table is not None and i.table.rows and any(i.table.columns)]


def _table_names(tables: Sequence[ContextItem]) -> list[str]:
    """One name per context table: its label ("Table 2"), with the document when two tables
    share a label, "table N" when it has none."""
    labels = [t.table.label if t.table is not None else "" for t in tables]
    out = []
    for k, (item, label) in enumerate(zip(tables, labels, strict=True), 1):
        name = label or f"table {k}"
        if labels.count(label) > 1:
            name = f"{name} ({item.doc_id})"
        out.append(name)
    return out


def named_rows(items: Sequence[ContextItem]) -> list[NamedRow]:
    """Every row of the context's tables, each under a distinct key."""
    tables = table_items(items)
    out: list[NamedRow] = []
    for name, item in zip(_table_names(tables), tables, strict=True):
        assert item.table is not None
        for r, row in enumerate(row_names(item.table)):
            out.append(NamedRow(enum_spelling(f"{name}: {row}"), item, r))
    return out


def _columns(items: Sequence[ContextItem]) -> list[str]:
    names: dict[str, None] = {}
    for item in table_items(items):
        assert item.table is not None
        names.update((enum_spelling(c), None) for c in item.table.columns if c)
    return list(names)


def cells_schema(items: Sequence[ContextItem], required: bool = False) -> dict[str, Any]:
    """The reply's `cells` and `cell_math` properties ({} when the context holds no table)."""
    rows = list(dict.fromkeys(r.key for r in named_rows(items)))
    columns = _columns(items)
    if not rows or not columns:
        return {}
    cell = {
        "type": "object",
        "properties": {"row": {"type": "string", "enum": rows}, "column": {"type": "string", "enum": columns}},
        "required": ["row", "column"],
        "additionalProperties": False,
    }
    return {
        "cells": {"type": "array", "items": cell, "minItems": 1 if required else 0, "maxItems": MAX_CELLS},
        "cell_math": {"type": "string", "enum": list(CELL_MATH)},
    }


def reply_fields(question: Question, items: Sequence[ContextItem], gen: GenerationPart) -> ReplyFields | None:
    """The named-cell fields for this question and context: a question with a unit (one
    value, not true/false) over a context holding a table record; None otherwise, and the
    prompt is then exactly as without the feature."""
    if gen.table_cells == "off" or not unit_is_given(question.answer_unit):
        return None
    if is_true_false(question) or asks_for_several(question):
        return None
    required = gen.table_cells == "required"
    properties = cells_schema(items, required)
    return ReplyFields(properties, REQUIRED_RULE if required else CELLS_RULE) if properties else None


def _cell(table: TableRecord, row: int, column: str) -> str | None:
    """The cell at `row` under the column spelled `column` (as the enum spelled it)."""
    for name, cell in zip(table.columns, table.rows[row].cells, strict=True):
        if enum_spelling(name) == column:
            return cell
    return None


def _operand(name: str, entry: object, rows: Mapping[str, NamedRow]) -> Operand | str:
    """The operand a named cell gives, or why it gives none."""
    if not isinstance(entry, dict):
        return f"cell {name} is not a row and a column"
    key, column = str(entry.get("row") or ""), str(entry.get("column") or "")
    found = rows.get(key)
    if found is None:
        return f"cell {name}: no row {key!r} in the context"
    table = found.item.table
    assert table is not None
    cell = _cell(table, found.row, column)
    where = GROUP_SEP.join(p for p in (table.label, row_names(table)[found.row], column) if p)
    if cell is None:
        return f"cell {name}: {table.label or 'the table'} has no column {column!r}"
    number = cell_number(cell)
    if number is None:
        return f"cell {name} ({where}) holds {cell!r}, not a number"
    original = next(c for c in table.columns if enum_spelling(c) == column)
    return Operand(
        name,
        f"{number:.15g}",
        cell_unit(table, found.row, original),
        found.item.doc_id,
        node=found.item.node_id,
        cell=f"{where} = {cell}",
        table_row=table.rows[found.row].label,
        table_column=original,
    )


def read_cells(data: Mapping[str, Any], items: Sequence[ContextItem], question_unit: str) -> Working | None:
    """The named cells read, put in the question's unit and computed (None when the reply
    named no cell). A working with an `error` is not used: the reply's own value stands."""
    raw = data.get("cells")
    if not isinstance(raw, list) or not raw:
        return None
    math = str(data.get("cell_math") or "a")
    expression = math if math in CELL_MATH else "a"
    rows = {r.key: r for r in named_rows(items)}
    names = ("a", "b")[: len(raw[:MAX_CELLS])]
    read = [_operand(name, entry, rows) for name, entry in zip(names, raw, strict=False)]
    problems = [r for r in read if isinstance(r, str)]
    operands = [r for r in read if isinstance(r, Operand)]
    if problems:
        return Working(expression, tuple(operands), error="; ".join(problems))
    if "b" in expression and len(operands) < 2:
        expression = "a"  # a second cell the reply did not name: the first cell is the answer
    converted = in_units(operands, question_unit)
    try:
        result = safe_eval(expression, {o.name: o.used for o in converted if o.used is not None})
    except ComputeError as exc:
        return Working(expression, tuple(converted), error=str(exc))
    return Working(expression, tuple(converted), result=significant(result, CELL_DIGITS))
