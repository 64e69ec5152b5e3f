"""Tables on a PDF page: PyMuPDF's `find_tables` finds the grid, the cell text is read
from the page's words.

PyMuPDF's own cell text drops decimal points into a separate line for some TeX fonts
("27.94" -> "2794\\n."), so cells are filled from `get_text("words")`, which keeps
numbers intact. A grid row that holds several text rows (tables ruled only above and
below a block of rows) is split at its baselines so each printed row stays one line.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import pymupdf

from kohaku_rag.document.table_record import GROUP_SEP, TableRecord, TableRow, caption_label
from kohaku_rag.document.tree import BBox
from kohaku_rag.parse.pdf_layout import TEXT_FLAGS, Line

Word = tuple[float, float, float, float, str]

MIN_RULES = 2  # booktabs tables have at least a top and a bottom rule
RULE_MIN_WIDTH = 30.0
MAX_BAND_HEIGHT = 40.0  # taller filled rectangles are panels, not shaded table rows
_NUMBER = re.compile(r"[-+±−]?[\d.,]+\s*%?")


@dataclass(frozen=True)
class FoundTable:
    bbox: BBox
    rows: tuple[tuple[str, ...], ...]
    # Each printed row's box, the table's width wide (a cited row is highlighted on its page).
    row_boxes: tuple[BBox, ...] = ()
    # Each column's (x0, x1) on the page: with a row's box, where a cell is.
    col_spans: tuple[tuple[float, float], ...] = ()

    def text(self) -> str:
        return "\n".join(" | ".join(row) for row in self.rows)


def page_words(page: pymupdf.Page) -> list[Word]:
    """Words with their boxes, built from characters so that an exponent keeps its
    meaning: "10" followed by a raised "20" reads "10^20", not "1020"."""
    words: list[Word] = []
    data = page.get_text("rawdict", flags=TEXT_FLAGS)
    for block in data["blocks"]:
        for line in block.get("lines", []):
            if abs(line["dir"][1]) > 0.05:
                continue
            chars: list[tuple[float, float, float, float]] = []
            text = ""
            prev_sup = False

            def close() -> None:
                nonlocal chars, text
                if text:
                    box = (
                        min(c[0] for c in chars),
                        min(c[1] for c in chars),
                        max(c[2] for c in chars),
                        max(c[3] for c in chars),
                    )
                    words.append((*box, text))
                chars, text = [], ""

            for span in line["spans"]:
                sup = bool(span["flags"] & pymupdf.TEXT_FONT_SUPERSCRIPT)
                for ch in span["chars"]:
                    c, box = ch["c"], ch["bbox"]
                    if c.isspace():
                        close()
                        continue
                    if chars and box[0] - chars[-1][2] > 0.25 * span["size"]:
                        close()
                    if sup and not prev_sup and text[-1:].isdigit():
                        text += "^"
                    text += c
                    chars.append(tuple(box))
                    prev_sup = sup
            close()
    return words


def might_hold_table(page: pymupdf.Page, lines: Sequence[Line]) -> bool:
    """Cheap gate before `find_tables`, whose layout model costs 0.5-1.5 s a page.

    A table here is rules or shaded bands of one width stacked above each other with
    tabular text between them: at least two baselines carrying several separate pieces
    of text (cells). Tables drawn with neither rules nor shading are not looked for."""
    h = page.rect.height
    groups: dict[tuple[int, int], list[tuple[float, float, float, float]]] = defaultdict(list)
    for drawing in page.get_drawings():
        for item in drawing["items"]:
            if item[0] == "l":
                a, b = item[1], item[2]
                if abs(a.y - b.y) >= 1:
                    continue
                seg = (min(a.x, b.x), a.y, max(a.x, b.x), a.y)
            elif item[0] == "re":
                r = item[1]
                if r.height > 1.5 and not (drawing.get("fill") and r.height <= MAX_BAND_HEIGHT):
                    continue
                seg = (r.x0, r.y0, r.x1, r.y1)
            else:
                continue
            if seg[2] - seg[0] >= RULE_MIN_WIDTH and 0.05 * h < seg[1] and seg[3] < 0.95 * h:
                groups[(round(seg[0] / 3), round(seg[2] / 3))].append(seg)
    for segs in groups.values():
        if len(segs) < MIN_RULES:
            continue
        x0, y0 = min(s[0] for s in segs) - 2, min(s[1] for s in segs)
        x1, y1 = max(s[2] for s in segs) + 2, max(s[3] for s in segs)
        pieces = Counter(
            round(ln.baseline / 2)
            for ln in lines
            if x0 <= (ln.x0 + ln.x1) / 2 <= x1 and y0 <= (ln.y0 + ln.y1) / 2 <= y1
        )
        if sum(n >= 2 for n in pieces.values()) >= 2:
            return True
    return False


def find_page_tables(page: pymupdf.Page, lines: Sequence[Line], words: Sequence[Word]) -> list[FoundTable]:
    if not might_hold_table(page, lines):
        return []
    out: list[FoundTable] = []
    for tab in page.find_tables().tables:
        grid: list[list[BBox | None]] = [list(r.cells) for r in tab.rows]
        header = tab.header
        if header.external and any(header.cells):
            grid.insert(0, list(header.cells))
        boxed, keep = _rows(grid, words)
        rows = [row for row, _ in boxed]
        if len(rows) < 2 or max(len(r) for r in rows) < 2:
            continue
        bbox = tuple(tab.bbox)
        if header.external:
            hb = header.bbox
            bbox = (min(bbox[0], hb[0]), min(bbox[1], hb[1]), max(bbox[2], hb[2]), max(bbox[3], hb[3]))
        boxes = tuple((bbox[0], b[1], bbox[2], b[3]) for _, b in boxed)
        spans = tuple(_column_span(grid, j) for j in keep)
        out.append(FoundTable(bbox=bbox, rows=tuple(rows), row_boxes=boxes, col_spans=spans))
    return out


def _column_span(grid: list[list[BBox | None]], j: int) -> tuple[float, float]:
    cells = [c for r in grid if j < len(r) and (c := r[j]) is not None]
    return (min(c[0] for c in cells), max(c[2] for c in cells)) if cells else (0.0, 0.0)


def _is_number(cell: str) -> bool:
    """Whether a cell states a number ("28.07", "9.33 - 9.15"; not "top-1 err.")."""
    return any(_NUMBER.fullmatch(token) for token in cell.split())


def table_record(tab: FoundTable, caption: str, page: int) -> TableRecord | None:
    """The grid as a record: its header rows found (the leading rows without a numeric
    cell, a spanning cell filled over the columns it spans), the first column as row
    labels when it is text, a row printed over two lines kept one row, and a box per cell.
    None when no header row is found (the table is kept as its lines)."""
    rows = [list(r) for r in tab.rows]
    boxes = list(tab.row_boxes) or [tab.bbox] * len(rows)
    h = 0
    while h < min(3, len(rows) - 1) and not any(_is_number(c) for c in rows[h][1:]) and any(rows[h]):
        h += 1
    if h == 0:
        return None
    header = [list(r) for r in rows[:h]]
    for r in header[:-1]:  # a spanning group cell names every column under it
        for j in range(1, len(r)):
            if not r[j] and r[j - 1]:
                r[j] = r[j - 1]
    names = [GROUP_SEP.join(dict.fromkeys(r[j] for r in header if r[j])) for j in range(len(rows[0]))]
    body, body_boxes = _joined_rows(rows[h:], boxes[h:])
    labelled = sum(bool(r[0]) and not _is_number(r[0]) for r in body) >= max(1, len(body) // 2)
    first = 1 if labelled else 0
    spans = list(tab.col_spans) or [(tab.bbox[0], tab.bbox[2])] * len(names)
    head_box = _union(boxes[:h])
    return TableRecord(
        label=caption_label(caption),
        caption=caption,
        label_header=names[0] if labelled else "",
        columns=tuple(names[first:]),
        rows=tuple(
            TableRow(
                label=r[0] if labelled else "",
                cells=tuple(r[first:]),
                bbox=box,
                cell_boxes=tuple((x0, box[1], x1, box[3]) for x0, x1 in spans[first:]),
            )
            for r, box in zip(body, body_boxes, strict=True)
        ),
        page=page,
        bbox=tab.bbox,
        header_boxes=tuple((x0, head_box[1], x1, head_box[3]) for x0, x1 in spans[first:]),
    )


def _joined_rows(rows: list[list[str]], boxes: list[BBox]) -> tuple[list[list[str]], list[BBox]]:
    """Rows printed over two lines made one: a label alone on its line opens the next row's
    label; a line with no label whose cells are empty in the row above completes that row."""
    out: list[list[str]] = []
    out_boxes: list[BBox] = []
    pending: tuple[str, BBox] | None = None
    for row, box in zip(rows, boxes, strict=True):
        if row[0] and not any(row[1:]):
            pending = (f"{pending[0]} {row[0]}" if pending else row[0], _union([pending[1], box]) if pending else box)
            continue
        if pending is not None:
            row = [f"{pending[0]} {row[0]}".strip(), *row[1:]]
            box = _union([pending[1], box])
            pending = None
        if out and not row[0] and all(not out[-1][j] for j in range(1, len(row)) if row[j]):
            out[-1] = [a or b for a, b in zip(out[-1], row, strict=True)]
            out_boxes[-1] = _union([out_boxes[-1], box])
            continue
        out.append(row)
        out_boxes.append(box)
    if pending is not None:
        out.append([pending[0], *[""] * (len(rows[0]) - 1)])
        out_boxes.append(pending[1])
    return out, out_boxes


def _rows(grid: list[list[BBox | None]], words: Sequence[Word]) -> tuple[list[tuple[tuple[str, ...], BBox]], list[int]]:
    """The table's printed rows, each with its box (the grid row's, or a split row's words'),
    and the grid columns kept (those with text)."""
    rows: list[list[str]] = []
    boxes: list[BBox] = []
    for r, cells in enumerate(grid):
        per_cell = [_cell_words(c, words) for c in cells]
        lines = _baselines([w for ws in per_cell for w in ws])
        grid_box = _union([c for c in cells if c is not None])
        if r == 0 or len(lines) < 2:
            rows.append([_join(ws) for ws in per_cell])
            boxes.append(grid_box)
            continue
        split = [[_join([w for w in ws if _nearest(w, lines) == k]) for ws in per_cell] for k in range(len(lines))]
        # only split when every printed row has at least two filled cells; otherwise it is
        # wrapped text inside one cell
        if all(sum(bool(c) for c in row) >= 2 for row in split):
            rows.extend(split)
            for k in range(len(lines)):
                printed = _union([w[:4] for ws in per_cell for w in ws if _nearest(w, lines) == k])
                boxes.append((grid_box[0], printed[1], grid_box[2], printed[3]))
        else:
            rows.append([_join(ws) for ws in per_cell])
            boxes.append(grid_box)
    # a header wrapped onto a second grid row ("Intensity" / "(gCO2e/kWh)") is one row
    if len(rows) >= 3 and rows[1] and not rows[1][0] and not any(_NUMBER.fullmatch(c) for c in rows[1] if c):
        rows[0] = [f"{a} {b}".strip() for a, b in zip(rows[0], rows[1])]
        del rows[1]
        boxes[0] = _union([boxes[0], boxes.pop(1)])
    # drop columns that are empty everywhere (spanned cells leave them)
    keep = [j for j in range(max((len(r) for r in rows), default=0)) if any(j < len(r) and r[j] for r in rows)]
    table = [tuple(r[j] if j < len(r) else "" for j in keep) for r in rows]
    return [(row, box) for row, box in zip(table, boxes, strict=True) if any(row)], keep


def _union(boxes: Sequence[Sequence[float]]) -> BBox:
    if not boxes:
        return (0.0, 0.0, 0.0, 0.0)
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def _cell_words(cell: BBox | None, words: Sequence[Word]) -> list[Word]:
    if cell is None:
        return []
    x0, y0, x1, y1 = cell
    return [w for w in words if x0 - 1 <= (w[0] + w[2]) / 2 <= x1 + 1 and y0 - 1 <= (w[1] + w[3]) / 2 <= y1 + 1]


def _baselines(words: list[Word]) -> list[float]:
    """Vertical centres of the printed lines among `words`."""
    centres = sorted((w[1] + w[3]) / 2 for w in words)
    lines: list[list[float]] = []
    for c in centres:
        if lines and c - lines[-1][-1] <= 3:
            lines[-1].append(c)
        else:
            lines.append([c])
    return [sum(g) / len(g) for g in lines]


def _nearest(word: Word, lines: list[float]) -> int:
    c = (word[1] + word[3]) / 2
    return min(range(len(lines)), key=lambda k: abs(lines[k] - c))


def _join(words: Sequence[Word]) -> str:
    lines = _baselines(list(words))
    ordered = sorted(words, key=lambda w: (_nearest(w, lines), w[0]))
    return " ".join(w[4] for w in ordered).strip()
