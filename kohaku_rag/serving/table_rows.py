"""A cited table, shown precisely: its caption and the row that states the answer's value.

A PDF table is one sentence in the tree (its caption, then one `a | b | c` line per row),
and the parser keeps one rectangle per caption line and per row (parse/pdf_tables.py). A
citation of the table highlights the caption and the rows whose cells state the value, and
its quote is that row; when no row states it (a value computed from several rows), every
row is highlighted. A quote is bounded whatever the table's size (`QUOTE_ROWS` rows,
`QUOTE_CHARS` characters): a table of 10,000 rows would otherwise travel whole in every
answer that cites it, and be stored with it. A lake parsed before row rectangles existed has one rectangle for the
whole table: it is painted as it is, never cut at a word inside it.

A table kept as a record (an aligned table, table_record.py) has a sentence per row
after its caption, and a box per cell: its citation names the cell stating the value
(`cell_citation`) and the page paints that cell, its row's label and its column's header."""

from __future__ import annotations

import re
from collections.abc import Iterable

from kohaku_rag.document.table_record import TABLE_LABEL, TableRecord, cells_stating, row_record
from kohaku_rag.document.tree import Attachment, Node, NodeKind, Rect

_CAPTION = re.compile(rf"^{TABLE_LABEL}", re.IGNORECASE)
QUOTE_ROWS = 20  # rows a quote shows at most; the document holds the rest
QUOTE_CHARS = 4_000  # characters a quote holds at most, its caption and the cut's line included
_CUT_LINE = 40  # room kept for the line saying how many rows were left out


def bounded_quote(head: list[str], rows: Iterable[str], total: int) -> str:
    """The head lines (a caption), then the rows that fit in `QUOTE_ROWS` rows and
    `QUOTE_CHARS` characters; when some of the `total` rows are left out, a last line says
    how many. `rows` is read only as far as the quote goes."""
    lines = [cut_text(line, QUOTE_CHARS // 2) for line in head]
    size = sum(len(line) + 1 for line in lines)
    shown = 0
    for row in rows:
        room = QUOTE_CHARS - _CUT_LINE - size
        if shown == QUOTE_ROWS or len(row) + 1 > room:
            if shown == 0:  # a row longer than a whole quote: its start
                lines.append(cut_text(row, room))
                shown = 1
            break
        lines.append(row)
        size += len(row) + 1
        shown += 1
    if shown < total:
        left = total - shown
        lines.append(f"… {left:,} more row{'s' if left > 1 else ''} not quoted")
    return "\n".join(lines)


def cut_text(text: str, limit: int = QUOTE_CHARS) -> str:
    """The text, or its start and "…" when it is longer than `limit` characters."""
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


def states_value(text: str, value: str) -> bool:
    """Whether a text states the value as a whole number or word ("0.18", not the "1"
    inside "2018"); a blank or true/false value (1/0) states nothing quotable."""
    if not value or value in ("is_blank", "0", "1"):
        return False
    return re.search(rf"(?<![\w.]){re.escape(value)}(?![\w]|\.\d)", text) is not None


def is_table(node: Node) -> bool:
    return node.attachment is Attachment.TABLE


def table_lines(text: str) -> tuple[str | None, list[str]]:
    """(caption or None, rows) of a table sentence's text."""
    lines = [ln for ln in text.split("\n") if ln.strip()]
    if lines and _CAPTION.match(lines[0]):
        return lines[0], lines[1:]
    return None, lines


def stating_rows(text: str, value: str) -> list[int]:
    """The indexes of the rows that state the value."""
    _caption, rows = table_lines(text)
    return [i for i, row in enumerate(rows) if states_value(row, value)]


def table_rects(sentence: Node, value: str | None) -> list[Rect]:
    """The rectangles to paint for a cited table: the caption's lines and the stating rows
    (every row when none states the value, or no value is given)."""
    caption, rows = table_lines(sentence.text)
    rects = list(sentence.rects)
    if len(rects) < len(rows) + (1 if caption else 0):  # one box for the whole table (older lakes)
        return rects
    row_rects = rects[len(rects) - len(rows) :]
    caption_rects = rects[: len(rects) - len(rows)]
    stating = stating_rows(sentence.text, value or "")
    chosen = [row_rects[i] for i in stating] if stating else row_rects
    return [*caption_rects, *chosen]


def table_quote(text: str, value: str) -> str:
    """What a citation of the table quotes: the caption and the stating rows (the first
    rows when no row states the value), bounded (`bounded_quote`)."""
    caption, rows = table_lines(text)
    stating = [rows[i] for i in stating_rows(text, value)] or rows
    return bounded_quote([caption] if caption else [], stating, len(stating))


# ── Tables kept as records (table_record.py): the cited cell, not the whole row ──


def stating_cells(table: TableRecord, value: str) -> list[tuple[int, str]]:
    """(row index, column name) of each row with a cell stating `value`."""
    if not value or value in ("is_blank", "0", "1"):
        return []
    return cells_stating(table, value)


def row_index(para: Node, sentence: Node) -> int | None:
    """Which row of its table a row sentence is (None for the caption or another node)."""
    table = para.table
    if table is None or sentence.parent_id != para.node_id or sentence.kind is not NodeKind.SENTENCE:
        return None
    i = sentence.ordinal - 1 - (1 if table.caption else 0)
    return i if 0 <= i < len(table.rows) else None


def cell_rects(para: Node, children: list[Node], cited: list[Node], value: str | None) -> list[Rect]:
    """What to paint for a cited recorded table (`children`: its sentences; `cited`: those
    cited): its caption, and for each cited row stating the value the cell, the row's label
    and the column's header; with no stating row, the cited rows (every row when the
    table itself is cited)."""
    table = para.table
    assert table is not None
    page = para.page if para.page is not None else 1
    out: list[Rect] = [r for s in children if table.caption and s.ordinal == 1 for r in s.rects]
    rows = [i for i in (row_index(para, s) for s in cited) if i is not None]
    stating = [(i, c) for i, c in stating_cells(table, value or "") if not rows or i in rows]
    if not stating:
        chosen = rows or list(range(len(table.rows)))
        boxes = [table.rows[i].bbox for i in chosen]
        return out + [(page, *b) for b in boxes if b is not None]
    for i, column in stating:
        row = table.rows[i]
        j = table.columns.index(column)
        cell = row.cell_boxes[j] if j < len(row.cell_boxes) else None
        if cell is None or row.bbox is None:
            out += [(page, *row.bbox)] if row.bbox is not None else []
            continue
        first = row.cell_boxes[0] if row.cell_boxes else None
        if row.label and first is not None and first[0] > row.bbox[0]:
            out.append((page, row.bbox[0], row.bbox[1], first[0], row.bbox[3]))  # the row's label
        out.append((page, *cell))
        header = table.header_boxes[j] if j < len(table.header_boxes) else None
        if header is not None:
            out.append((page, *header))
    return out


def cell_citation(table: TableRecord, value: str, rows: list[int] | None = None) -> dict[str, str] | None:
    """ "Table 2, row *text generation*, column *mean*": the cell stating the value (in one
    of `rows` when given), for the answer card; None when no single cell states it."""
    stating = [(i, c) for i, c in stating_cells(table, value) if not rows or i in rows]
    if not stating:
        return None
    i, column = stating[0]
    return {"table": table.label or "table", "row": table.rows[i].label, "column": column}


def record_quote(table: TableRecord, value: str, rows: list[int] | None = None) -> str:
    """The caption and the rows stating the value, as records (the first rows, after the
    caption and the rows' header, when none does), bounded (`bounded_quote`)."""
    stating = [i for i, _ in stating_cells(table, value) if not rows or i in rows]
    head = [table.caption] if table.caption else []
    if not stating:
        head += [f"(rows: {table.label_header})"] if table.label_header else []
        stating = list(range(len(table.rows)))
    return bounded_quote(head, (row_record(table, table.rows[i]) for i in stating), len(stating))


def record_parts(table: TableRecord, value: str, rows: list[int] | None = None) -> list[dict[str, object]]:
    """The table's lines for the text view: the caption and the rows stating the value (of
    `rows`, when given) marked; with none stating it, `rows` (or every row) marked."""
    stating = {i for i, _ in stating_cells(table, value) if not rows or i in rows} or set(
        rows or range(len(table.rows))
    )
    lines = [(table.caption, True)] if table.caption else []
    lines += [(row_record(table, row), i in stating) for i, row in enumerate(table.rows)]
    return [{"text": line + "\n", "marked": marked} for line, marked in lines]
