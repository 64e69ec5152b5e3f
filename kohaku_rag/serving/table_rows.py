"""A cited table, shown precisely: its caption and the row that states the answer's value.

A PDF table is one sentence in the tree (its caption, then one `a | b | c` line per row),
and the parser keeps one rectangle per caption line and per row (parse/pdf_tables.py). A
citation of the table highlights the caption and the rows whose cells state the value, and
its quote is that row; when no row states it (a value computed from several rows), every
row is highlighted. A lake parsed before row rectangles existed has one rectangle for the
whole table: it is painted as it is, never cut at a word inside it."""

from __future__ import annotations

import re

from kohaku_rag.tree import Attachment, Node, Rect

_CAPTION = re.compile(r"^(table|tab\.)\s*([\dIVX]+|[A-Z]\.?\d*)", re.IGNORECASE)


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
    """What a citation of the table quotes: the caption and the stating row (the whole
    table when no row states the value)."""
    caption, rows = table_lines(text)
    stating = [rows[i] for i in stating_rows(text, value)]
    if not stating:
        return text
    return "\n".join([*([caption] if caption else []), *stating])
