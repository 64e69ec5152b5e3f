"""A table as the method keeps it, whatever it was read from: its caption, its column
names, its rows (a label and one cell per column) and, for PDFs, where each cell is.

Parsers build a `TableRecord` (parse/text_tables.py from text payloads, parse/pdf_tables.py
from PDF pages, indexing/table_repair.py from a checked model repair). The record then travels
on one path and is never parsed back out of text: the tree stores it on the table's paragraph
node (tree.py), the vector store on that node's row (stores/store_rows.py), retrieval on the
context item (retrieval/context.py), and each user makes the text it needs from it: the row
sentences the index embeds and BM25 reads (`row_sentence`, which names the table and the
columns, so a 1.5B model reading a row never counts to the 7th name of a header 20 lines up),
the prompt's table (`table_text`), the table query's columns, the cited cell.

`TABLE_LABEL` is the project's one caption pattern and `cell_number` its one reader of a
cell's number.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import pyarrow as pa

__all__ = [
    "BBox",
    "GROUP_SEP",
    "TABLE_TYPE",
    "TableRecord",
    "TableRow",
    "TABLE_LABEL",
    "caption_label",
    "cell_number",
    "cell_unit",
    "cells_stating",
    "column_stating",
    "column_unit",
    "record_from_arrow",
    "record_from_json",
    "record_to_arrow",
    "record_to_json",
    "row_names",
    "with_rows",
    "row_record",
    "row_sentence",
    "table_text",
]

# A box on a PDF page (x0, y0, x1, y1), in points: the one definition (tree.py uses it too).
BBox = tuple[float, float, float, float]
# Between the parts of a multi-row header: "inference energy (kWh) · mean".
GROUP_SEP = " · "
# A table's label as papers print it: "Table 2", "Tab. 3", "Table IV", "Table A.1". The one
# pattern every caption test of the project is built from (parsers, ranking, the page).
TABLE_LABEL = r"(?:table|tab\.)\s*(?:[0-9]+|[IVXLC]+\b|[A-Z]\.?[0-9]+)"
_LABEL = re.compile(r"^\s*(?:table|tab\.)\s*([0-9]+|[IVXLC]+\b|[A-Z]\.?[0-9]+)", re.IGNORECASE)
CAPTION_IN_ROW_CHARS = 80  # of the caption repeated in each row's indexed text


@dataclass(frozen=True)
class TableRow:
    label: str  # the row's name (its first column), "" when the table has none
    cells: tuple[str, ...]  # one per column of the table
    bbox: BBox | None = None  # the printed row on its page (PDF tables)
    cell_boxes: tuple[BBox | None, ...] = ()  # one per cell (PDF tables); () when unknown


@dataclass(frozen=True)
class TableRecord:
    label: str  # "Table 2", "" when no caption was found
    caption: str  # the whole caption, label included
    label_header: str  # the name of the row-label column ("task"), "" when unnamed
    columns: tuple[str, ...]  # one name per cell column, multi-row headers joined by GROUP_SEP
    rows: tuple[TableRow, ...]
    page: int | None = None
    bbox: BBox | None = None
    header_boxes: tuple[BBox | None, ...] = ()  # one per column (PDF tables); () when unknown

    def __post_init__(self) -> None:
        width = len(self.columns)
        for row in self.rows:
            if len(row.cells) != width:
                raise ValueError(f"a row of {len(row.cells)} cells in a table of {width} columns: {row.label!r}")


def caption_label(caption: str) -> str:
    """ "Table 2" of "Table 2. Mean and standard deviation ..." ("" when it has none)."""
    m = _LABEL.match(caption)
    return f"Table {m.group(1)}" if m else ""


def _column_parts(columns: Sequence[str]) -> list[tuple[str, str]]:
    """(group, leaf) of each column: a multi-row header's upper rows are its group."""
    out = []
    for name in columns:
        group, _, leaf = name.rpartition(GROUP_SEP)
        out.append((group, leaf))
    return out


def row_record(table: TableRecord, row: TableRow) -> str:
    """One row as a record: its label, then each cell named by its column; a header group
    is named once, at its first column ("text generation · inference energy (kWh) mean:
    0.047 · std: 0.03"). Empty cells are left out."""
    parts = [row.label] if row.label else []
    previous = None
    for (group, leaf), cell in zip(_column_parts(table.columns), row.cells, strict=True):
        if not cell:
            continue
        name = f"{group} {leaf}".strip() if group and group != previous else leaf
        previous = group
        parts.append(f"{name}: {cell}" if name else cell)
    return GROUP_SEP.join(parts)


def _short_caption(table: TableRecord) -> str:
    rest = table.caption[len(table.label) :] if table.label else table.caption
    rest = rest.lstrip(" .:-–—").strip()
    if len(rest) > CAPTION_IN_ROW_CHARS:
        rest = rest[:CAPTION_IN_ROW_CHARS].rsplit(" ", 1)[0] + " …"
    return rest


def row_sentence(table: TableRecord, row: TableRow) -> str:
    """A row's indexed text, which names its table and columns on its own: "Table 2 (Mean
    and standard deviation of energy …) · text generation · inference energy (kWh) mean:
    0.047 · std: 0.03"."""
    name = table.label or "Table"
    short = _short_caption(table)
    head = f"{name} ({short})" if short else name
    return f"{head}{GROUP_SEP}{row_record(table, row)}"


def table_text(table: TableRecord) -> str:
    """What a prompt and the BM25 index read: the caption, then one record per row."""
    lines = [table.caption] if table.caption else []
    if table.label_header:
        lines.append(f"(rows: {table.label_header})")
    lines += [row_record(table, row) for row in table.rows]
    return "\n".join(lines)


# A cell's number as tables print it: "1,171", "−0.5", "52.88%", "$40M" is not one (a
# magnitude word changes it), "3.3×10^18", "2e−4", "6.43 (6.61±0.16)" (the first number;
# what follows in parentheses is a spread or a second reading), "74%*" (a footnote mark).
_CELL_NUMBER = re.compile(
    r"^[~≈<>≤≥$€£]*\s*([-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+)"
    r"(?:\s*(?:[eE]([-+]?\d+)|[×x]\s*10\^?\s*([-+]?\d+)))?"
    r"\s*%?\s*(?:[*†‡]+)?\s*(?:\(.*\))?\s*$"
)
_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$|^[-+]?[\d.]+$")


def cell_number(text: str) -> float | None:
    """The number a table cell states, None when it states none (a name, a range, "n/a").
    The project's one reader of a cell's number: parsers, the table query, the page."""
    s = text.strip().replace("−", "-").replace("–", "-").replace("\u2009", "").replace(" ", " ")
    m = _CELL_NUMBER.match(s)
    if m is None:
        return None
    digits = m.group(1)
    if "," in digits and not _THOUSANDS.match(digits):
        return None  # "1,2": a list, not a number
    try:
        number = float(digits.replace(",", ""))
    except ValueError:
        return None
    power = m.group(2) or m.group(3)
    return number * 10 ** int(power) if power else number


def _same_number(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= 1e-9 * max(1.0, abs(b))


def column_stating(table: TableRecord, row: int, value: str) -> str | None:
    """The name of the column whose cell in `row` states `value` (as text or as the same
    number), None when no cell of that row does."""
    if not 0 <= row < len(table.rows) or not value.strip():
        return None
    wanted = cell_number(value)
    for name, cell in zip(table.columns, table.rows[row].cells, strict=True):
        if cell.strip() == value.strip() or _same_number(cell_number(cell), wanted):
            return name
    return None


def cells_stating(table: TableRecord, value: str) -> list[tuple[int, str]]:
    """(row index, column name) of every row whose cell states `value`, first column first."""
    out = []
    for i in range(len(table.rows)):
        column = column_stating(table, i, value)
        if column is not None:
            out.append((i, column))
    return out


_UNIT_IN_NAME = re.compile(r"\(([^()]{1,24})\)\s*$|\bin\s+([A-Za-z$€£%][\w/$€£%.-]{0,15})\s*$")


def column_unit(table: TableRecord, column: str) -> str:
    """The unit a column's header gives its cells ("Energy (kWh)", "inference energy (kWh) ·
    mean", "Cost in $"), "" when it names none. The leaf's own unit first, then its group's."""
    group, _, leaf = column.rpartition(GROUP_SEP)
    for part in (leaf, group):
        m = _UNIT_IN_NAME.search(part.strip())
        if m:
            return (m.group(1) or m.group(2)).strip()
    return ""


def cell_unit(table: TableRecord, row: int, column: str) -> str:
    """The unit of a cell: its column's (`column_unit`), else its row label's, for tables
    whose rows are the quantities ("Training energy (MWh)" over one column per model)."""
    unit = column_unit(table, column)
    if unit or not 0 <= row < len(table.rows):
        return unit
    m = _UNIT_IN_NAME.search(table.rows[row].label.strip())
    return (m.group(1) or m.group(2)).strip() if m else ""


def row_names(table: TableRecord) -> list[str]:
    """One distinct name per row, as a reply names a row: its label, with "#2", "#3" after a
    label seen before (rows under a spanning label share it); "row k" for an unlabelled row."""
    names: list[str] = []
    seen: dict[str, int] = {}
    for k, row in enumerate(table.rows, 1):
        base = " ".join(row.label.split()) or f"row {k}"
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base} #{seen[base]}")
    return names


def with_rows(table: TableRecord, keep: Sequence[int]) -> TableRecord:
    """The table with only the rows `keep` (indexes, kept in table order)."""
    return replace(table, rows=tuple(table.rows[k] for k in sorted(set(keep))))


_BOX = pa.list_(pa.float32(), 4)
# The record as the tree's Parquet column holds it (declared once, here).
TABLE_TYPE = pa.struct(
    [
        pa.field("label", pa.string()),
        pa.field("caption", pa.string()),
        pa.field("label_header", pa.string()),
        pa.field("columns", pa.list_(pa.string())),
        pa.field("header_boxes", pa.list_(_BOX)),
        pa.field("row_labels", pa.list_(pa.string())),
        pa.field("cells", pa.list_(pa.list_(pa.string()))),
        pa.field("row_boxes", pa.list_(_BOX)),
        pa.field("cell_boxes", pa.list_(pa.list_(_BOX))),
    ]
)


def _box(b: Sequence[float] | None) -> BBox | None:
    return None if b is None else (float(b[0]), float(b[1]), float(b[2]), float(b[3]))


def record_to_arrow(table: TableRecord) -> dict[str, object]:
    return {
        "label": table.label,
        "caption": table.caption,
        "label_header": table.label_header,
        "columns": list(table.columns),
        "header_boxes": [list(b) if b else None for b in table.header_boxes],
        "row_labels": [r.label for r in table.rows],
        "cells": [list(r.cells) for r in table.rows],
        "row_boxes": [list(r.bbox) if r.bbox else None for r in table.rows],
        "cell_boxes": [[list(b) if b else None for b in r.cell_boxes] for r in table.rows],
    }


def record_from_arrow(
    value: dict[str, object] | None, page: int | None = None, bbox: BBox | None = None
) -> TableRecord | None:
    if value is None:
        return None
    v: dict = dict(value)
    rows = tuple(
        TableRow(
            label=label,
            cells=tuple(cells),
            bbox=_box(rbox),
            cell_boxes=tuple(_box(b) for b in (cboxes or ())),
        )
        for label, cells, rbox, cboxes in zip(v["row_labels"], v["cells"], v["row_boxes"], v["cell_boxes"], strict=True)
    )
    return TableRecord(
        label=v["label"],
        caption=v["caption"],
        label_header=v["label_header"],
        columns=tuple(v["columns"]),
        rows=rows,
        page=page,
        bbox=bbox,
        header_boxes=tuple(_box(b) for b in (v["header_boxes"] or ())),
    )


def record_to_json(table: TableRecord) -> str:
    """The record as one JSON text (the vector store's column, a context item's field)."""
    return json.dumps(record_to_arrow(table), ensure_ascii=False, separators=(",", ":"))


def record_from_json(text: str | None, page: int | None = None, bbox: BBox | None = None) -> TableRecord | None:
    return record_from_arrow(json.loads(text), page, bbox) if text else None
