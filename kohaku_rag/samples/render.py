"""Render the sample Markdown documents into real PDFs with PyMuPDF only.

Text goes through `Page.insert_htmlbox` (PyMuPDF's Story engine) block by block, so a
paragraph that does not fit a column is cut between words and continues in the next
column, as in a typeset paper. Tables are drawn as booktabs-style rules plus cell text,
and a `<!-- chart: Label column | Value column -->` line draws a vector bar chart from
the table above it, with the following "Figure N: ..." line as its caption. Every page
gets a running header and a page number, which a parser must remove again.

Only a small Markdown subset is understood: `#`/`##`/`###` headings, paragraphs,
`- ` bullet lists, pipe tables, `**bold**`, `*italic*` and the chart comment.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import pymupdf

PAGE = pymupdf.Rect(0, 0, 612, 792)  # US letter
TOP, BOTTOM = 72.0, 726.0
HEADER_Y, FOOTER_Y = 44.0, 762.0
GUTTER = 18.0
CHART_HEIGHT = 150.0
TABLE_FONT = 8.5
TABLE_PAD = 14.0  # wide enough that cells stay separate text lines

CSS = """
body {font-family: serif; font-size: 10pt; line-height: 1.25; margin: 0; padding: 0;}
p {margin: 0;}
h1 {font-family: sans-serif; font-size: 20pt; font-weight: bold; margin: 0;}
h2 {font-family: sans-serif; font-size: 14pt; font-weight: bold; margin: 0;}
h3 {font-family: sans-serif; font-size: 11.5pt; font-weight: bold; margin: 0;}
p.note {font-style: italic;}
p.caption {font-size: 9pt;}
ul {margin: 0;}
"""

_TABLE_RULE = re.compile(r"^\|?\s*:?-{2,}")
_CHART = re.compile(r"^<!--\s*chart:\s*(.+?)\s*\|\s*(.+?)\s*-->$")
_CAPTION = re.compile(r"^(Figure|Table)\s+\d+:")


@dataclass(frozen=True)
class Block:
    kind: str  # title, note, h2, h3, para, bullets, table, chart, caption
    text: str = ""
    rows: tuple[tuple[str, ...], ...] = ()
    items: tuple[str, ...] = ()
    chart: tuple[str, str] | None = None


def parse_markdown(source: str) -> list[Block]:
    blocks: list[Block] = []
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if not line:
            i += 1
            continue
        if m := _CHART.match(line):
            blocks.append(Block("chart", chart=(m.group(1), m.group(2))))
            i += 1
        elif line.startswith("### "):
            blocks.append(Block("h3", line[4:].strip()))
            i += 1
        elif line.startswith("## "):
            blocks.append(Block("h2", line[3:].strip()))
            i += 1
        elif line.startswith("# "):
            blocks.append(Block("title", line[2:].strip()))
            i += 1
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                row = lines[i].strip()
                if not _TABLE_RULE.match(row):
                    rows.append(tuple(c.strip() for c in row.strip("|").split("|")))
                i += 1
            blocks.append(Block("table", rows=tuple(rows)))
        elif line.startswith("- "):
            items = []
            while i < len(lines) and lines[i].strip().startswith("- "):
                items.append(lines[i].strip()[2:])
                i += 1
            blocks.append(Block("bullets", items=tuple(items)))
        else:
            para = [line]
            i += 1
            while i < len(lines) and lines[i].strip() and not re.match(r"^(#|\||- |<!--)", lines[i].strip()):
                para.append(lines[i].strip())
                i += 1
            text = " ".join(para)
            kind = "caption" if _CAPTION.match(text) else ("note" if blocks and blocks[-1].kind == "title" else "para")
            blocks.append(Block(kind, text))
    return blocks


def _inline(text: str) -> str:
    out = html.escape(text, quote=False)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"\*(.+?)\*", r"<i>\1</i>", out)


def _height(fragment: str, width: float) -> float:
    _, filled = pymupdf.Story(html=fragment, user_css=CSS).place(pymupdf.Rect(0, 0, width, 10_000))
    return filled[3]


@dataclass
class _Flow:
    """Cursor over pages and columns of the output document."""

    doc: pymupdf.Document
    columns: int
    page: pymupdf.Page | None = None
    col: int = 0
    y: float = TOP
    column_top: float = TOP
    frames: list[tuple[float, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.columns == 1:
            self.frames = [(72.0, 540.0)]
        else:
            width = (PAGE.width - 2 * 54.0 - GUTTER) / 2
            self.frames = [(54.0, 54.0 + width), (54.0 + width + GUTTER, PAGE.width - 54.0)]
        self.page = self.doc.new_page(width=PAGE.width, height=PAGE.height)

    @property
    def x0(self) -> float:
        return self.frames[self.col][0]

    @property
    def x1(self) -> float:
        return self.frames[self.col][1]

    @property
    def width(self) -> float:
        return self.x1 - self.x0

    @property
    def room(self) -> float:
        return BOTTOM - self.y

    def next_column(self) -> None:
        if self.col + 1 < len(self.frames):
            self.col += 1
            self.y = self.column_top
        else:
            self.page = self.doc.new_page(width=PAGE.width, height=PAGE.height)
            self.col = 0
            self.y = self.column_top = TOP

    def full_width(self, fragment: str, gap: float) -> None:
        """Place a block across all columns (the title area of page 1)."""
        x0, x1 = self.frames[0][0], self.frames[-1][1]
        h = _height(fragment, x1 - x0)
        self._insert(pymupdf.Rect(x0, self.y, x1, self.y + h + 4), fragment)
        self.y = self.column_top = self.y + h + gap

    def html(self, fragment: str, gap: float, keep_with_next: float = 0.0) -> None:
        h = _height(fragment, self.width)
        if h + keep_with_next > self.room:
            self.next_column()
        self._insert(pymupdf.Rect(self.x0, self.y, self.x1, self.y + h + 4), fragment)
        self.y += h + gap

    def paragraph(self, text: str, css_class: str, gap: float) -> None:
        """A paragraph that may be cut between words at a column end."""
        words = text.split()
        while words:
            whole = self._para(words, css_class)
            if _height(whole, self.width) <= self.room:
                self.html(whole, gap)
                return
            lo, hi = 0, len(words)  # largest prefix that fits
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if _height(self._para(words[:mid], css_class), self.width) <= self.room:
                    lo = mid
                else:
                    hi = mid - 1
            if lo >= 8:  # do not leave a stub of a few words behind
                self.html(self._para(words[:lo], css_class), 0.0)
                words = words[lo:]
            self.next_column()

    @staticmethod
    def _para(words: Sequence[str], css_class: str) -> str:
        cls = f' class="{css_class}"' if css_class else ""
        return f"<p{cls}>{_inline(' '.join(words))}</p>"

    def _insert(self, rect: pymupdf.Rect, fragment: str) -> None:
        assert self.page is not None
        spare, _ = self.page.insert_htmlbox(rect, fragment, css=CSS, scale_low=1)
        if spare < 0:
            raise ValueError(f"sample renderer: block does not fit its box: {fragment[:60]!r}")

    def reserve(self, height: float) -> pymupdf.Rect:
        if height > self.room:
            self.next_column()
        rect = pymupdf.Rect(self.x0, self.y, self.x1, self.y + height)
        self.y += height
        return rect


def _table_layout(rows: Sequence[Sequence[str]], width: float) -> tuple[list[list[list[str]]], list[float]]:
    """Cell lines and column widths; header cells wrap at " (" when the table is too wide."""

    def widths(cells: list[list[list[str]]]) -> list[float]:
        out = []
        for j in range(max(len(r) for r in cells)):
            widest = 0.0
            for r, row in enumerate(cells):
                font = "hebo" if r == 0 else "helv"
                for line in row[j] if j < len(row) else []:
                    widest = max(widest, pymupdf.get_text_length(line, fontname=font, fontsize=TABLE_FONT))
            out.append(widest + TABLE_PAD)
        return out

    cells = [[[c] for c in row] for row in rows]
    cols = widths(cells)
    if sum(cols) > width:
        cells[0] = [c[0].replace(" (", "\n(").split("\n") for c in cells[0]]
        cols = widths(cells)
    if sum(cols) > width:
        raise ValueError(f"sample renderer: table too wide for a {width:.0f} pt column")
    return cells, cols


def _draw_table(flow: _Flow, rows: Sequence[Sequence[str]]) -> None:
    cells, cols = _table_layout(rows, flow.width)
    line_h = TABLE_FONT * 1.35
    heights = [max(len(c) for c in row) * line_h + 5 for row in cells]
    rect = flow.reserve(sum(heights) + 10)
    page = flow.page
    assert page is not None
    x0 = rect.x0 + (rect.width - sum(cols)) / 2
    x1 = x0 + sum(cols)
    y = rect.y0 + 2
    page.draw_line((x0, y), (x1, y), width=0.8)
    for r, row in enumerate(cells):
        x = x0
        for j, lines in enumerate(row):
            for k, text in enumerate(lines):
                page.insert_text(
                    (x + TABLE_PAD / 2, y + 3 + TABLE_FONT + k * line_h),
                    text,
                    fontname="hebo" if r == 0 else "helv",
                    fontsize=TABLE_FONT,
                )
            x += cols[j]
        y += heights[r]
        if r == 0:
            page.draw_line((x0, y), (x1, y), width=0.5)
    page.draw_line((x0, y), (x1, y), width=0.8)


def _nice_step(top: float) -> float:
    raw = top / 4
    mag = 10 ** math.floor(math.log10(raw))
    return next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)


def _draw_chart(flow: _Flow, table: Sequence[Sequence[str]], label_col: str, value_col: str) -> None:
    """A vector bar chart: axes, ticks, bars with value labels, rotated y-axis title."""
    header = list(table[0])
    li, vi = header.index(label_col), header.index(value_col)
    labels = [row[li] for row in table[1:]]
    values = [float(row[vi].replace(",", "")) for row in table[1:]]
    rect = flow.reserve(CHART_HEIGHT)
    page = flow.page
    assert page is not None
    plot = pymupdf.Rect(rect.x0 + 46, rect.y0 + 12, rect.x1 - 10, rect.y1 - 30)
    step = _nice_step(max(values))
    top = step * math.ceil(max(values) / step)
    page.draw_line(plot.bl, plot.br, width=0.8)
    page.draw_line(plot.bl, plot.tl, width=0.8)
    for k in range(int(round(top / step)) + 1):
        v = k * step
        y = plot.y1 - plot.height * v / top
        page.draw_line((plot.x0 - 3, y), (plot.x0, y), width=0.6)
        tick = f"{v:g}"
        page.insert_text((plot.x0 - 5 - pymupdf.get_text_length(tick, fontsize=7), y + 2.5), tick, fontsize=7)
    slot = plot.width / len(values)
    for k, (label, v) in enumerate(zip(labels, values)):
        bx0 = plot.x0 + k * slot + slot * 0.2
        bar = pymupdf.Rect(bx0, plot.y1 - plot.height * v / top, bx0 + slot * 0.6, plot.y1)
        page.draw_rect(bar, color=(0.15, 0.25, 0.45), fill=(0.35, 0.5, 0.75), width=0.5)
        value = f"{v:g}"
        page.insert_text(
            (bar.x0 + (bar.width - pymupdf.get_text_length(value, fontsize=6.5)) / 2, bar.y0 - 2), value, fontsize=6.5
        )
        page.insert_text(
            (bar.x0 + (bar.width - pymupdf.get_text_length(label, fontsize=7)) / 2, plot.y1 + 9), label, fontsize=7
        )
    page.insert_text(
        (plot.x0 + (plot.width - pymupdf.get_text_length(label_col, fontsize=7.5)) / 2, plot.y1 + 21),
        label_col,
        fontsize=7.5,
    )
    ylab_w = pymupdf.get_text_length(value_col, fontsize=7.5)
    page.insert_text((rect.x0 + 10, plot.y1 - (plot.height - ylab_w) / 2), value_col, fontsize=7.5, rotate=90)


def render_pdf(source: str, *, columns: int, running_header: str, metadata: dict[str, str]) -> bytes:
    """The PDF bytes for one Markdown document; the same input gives the same bytes."""
    doc = pymupdf.open()
    flow = _Flow(doc, columns)
    blocks = parse_markdown(source)
    last_table: tuple[tuple[str, ...], ...] = ()
    for k, block in enumerate(blocks):
        nxt = blocks[k + 1] if k + 1 < len(blocks) else None
        if block.kind == "title":
            flow.full_width(f"<h1>{_inline(block.text)}</h1>", 8)
        elif block.kind == "note":
            flow.full_width(f'<p class="note">{_inline(block.text)}</p>', 16)
        elif block.kind in ("h2", "h3"):
            if flow.y > flow.column_top:
                flow.y += 8 if block.kind == "h2" else 4  # space above a heading
            flow.html(f"<{block.kind}>{_inline(block.text)}</{block.kind}>", 5, keep_with_next=48)
        elif block.kind == "para":
            flow.paragraph(block.text, "", 7)
        elif block.kind == "caption":
            # a table caption stays with its table, a figure caption follows its chart
            keep = 60 if nxt is not None and nxt.kind == "table" else 0
            flow.html(f'<p class="caption">{_inline(block.text)}</p>', 8, keep_with_next=keep)
        elif block.kind == "bullets":
            items = "".join(f"<li>{_inline(t)}</li>" for t in block.items)
            flow.html(f"<ul>{items}</ul>", 7)
        elif block.kind == "table":
            _draw_table(flow, block.rows)
            last_table = block.rows
        elif block.kind == "chart" and block.chart is not None:
            if nxt is not None and nxt.kind == "caption" and flow.room < CHART_HEIGHT + 40:
                flow.next_column()  # keep the chart with its caption
            _draw_chart(flow, last_table, *block.chart)
    for number in range(1, doc.page_count + 1):
        page = doc[number - 1]
        page.insert_text((72, HEADER_Y), running_header, fontsize=8, fontname="helv")
        page.insert_text((PAGE.width / 2 - 3, FOOTER_Y), str(number), fontsize=9, fontname="helv")
    doc.set_metadata(metadata)
    doc.subset_fonts()  # the Story engine embeds whole fonts (~1.5 MB a file otherwise)
    data = doc.tobytes(garbage=3, deflate=True, no_new_id=True)
    doc.close()
    return data
