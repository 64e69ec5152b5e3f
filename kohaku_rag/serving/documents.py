"""The lake's documents as the server shows them: titles, URLs, pages and sections, and a
PDF page rendered with a node's sentences highlighted (the rectangles the parser kept).

Ids come from clients, so each is checked against the lake's own tables before use: a
document must be indexed, a node must be in its tree, a page within the PDF. Files are
only ever opened at the path the lake recorded, never at one built from a request."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pymupdf

from kohaku_rag.document.tree import Node, NodeKind, Rect
from kohaku_rag.indexing.steps import SOURCES, TREES, read_source, read_tree
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import check_key
from kohaku_rag.serving.errors import ApiError
from kohaku_rag.serving.table_rows import (
    cell_citation,
    cell_rects,
    is_table,
    record_parts,
    row_index,
    stating_rows,
    table_lines,
    table_rects,
)

HIGHLIGHT = (1.0, 0.82, 0.0)  # the marker's yellow
HIGHLIGHT_OPACITY = 0.45


@dataclass(frozen=True)
class DocumentInfo:
    doc_id: str
    title: str
    url: str
    format: str
    path: Path
    pages: int | None  # PDF pages; None for text documents


class Documents:
    """Reads documents and trees from the lake, each tree kept until its file changes."""

    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self._trees: dict[str, tuple[int, list[Node]]] = {}
        self._lock = threading.Lock()

    def ids(self) -> list[str]:
        return sorted(set(self.lake.partitions(SOURCES)) & set(self.lake.partitions(TREES)))

    def info(self, doc_id: str) -> DocumentInfo:
        doc_id = self._known(doc_id)
        row = read_source(self.lake, doc_id)
        nodes = self.tree(doc_id)
        pages = max((n.page for n in nodes if n.page is not None), default=None) if row["format"] == "pdf" else None
        return DocumentInfo(doc_id, _title(doc_id, row, nodes), row["url"], row["format"], Path(row["path"]), pages)

    def tree(self, doc_id: str) -> list[Node]:
        doc_id = self._known(doc_id)
        path = self.lake.table(TREES, doc_id)
        stamp = path.stat().st_mtime_ns
        with self._lock:
            held = self._trees.get(doc_id)
            if held is not None and held[0] == stamp:
                return held[1]
        nodes = read_tree(self.lake, doc_id)
        with self._lock:
            self._trees[doc_id] = (stamp, nodes)
        return nodes

    def node(self, doc_id: str, node_id: str) -> Node:
        for n in self.tree(doc_id):
            if n.node_id == node_id:
                return n
        raise ApiError(404, f"document {doc_id!r} has no node {node_id!r}")

    def sentences(self, doc_id: str, node_id: str) -> list[Node]:
        """The sentences of a node: itself when it is one, else every sentence below it."""
        node = self.node(doc_id, node_id)
        if node.kind is NodeKind.SENTENCE:
            return [node]
        prefix = f"{node.node_id}:"
        return [n for n in self.tree(doc_id) if n.kind is NodeKind.SENTENCE and n.node_id.startswith(prefix)]

    def recorded_table(self, doc_id: str, node_id: str) -> tuple[Node, list[Node]] | None:
        """The table paragraph holding `node_id` (itself or one of its rows) and its
        sentences, when that table is kept as a record; else None."""
        node = self.node(doc_id, node_id)
        para = node
        if node.kind is NodeKind.SENTENCE and node.parent_id is not None:
            para = self.node(doc_id, node.parent_id)
        if para.table is None:
            return None
        return para, self.sentences(doc_id, para.node_id)

    def sections(self, doc_id: str) -> list[dict[str, object]]:
        return [
            {"node_id": n.node_id, "title": n.title, "page": n.page}
            for n in self.tree(doc_id)
            if n.kind is NodeKind.SECTION
        ]

    def _known(self, doc_id: str) -> str:
        try:
            check_key(doc_id)
        except ValueError as exc:
            raise ApiError(400, f"document id: {exc}") from exc
        if not self.lake.table(TREES, doc_id).exists() or not self.lake.table(SOURCES, doc_id).exists():
            raise ApiError(404, f"no document {doc_id!r} in the lake")
        return doc_id

    def render_page(
        self,
        doc_id: str,
        page: int,
        highlight: str | None,
        dpi: int,
        value: str | None = None,
        more: Sequence[str] = (),
    ) -> bytes:
        """The PDF page as PNG, the sentences of node `highlight` painted over (of a cited
        table: its caption and the rows stating `value`, or the cells stating it and `more`)."""
        info = self.info(doc_id)
        if info.format != "pdf":
            raise ApiError(404, f"document {doc_id!r} is {info.format}, not a PDF: ask /api/documents/{doc_id}/text")
        if not info.path.is_file():
            raise ApiError(404, f"the PDF of {doc_id!r} is no longer where it was indexed from")
        sentences = self.sentences(doc_id, highlight) if highlight else []
        with pymupdf.open(info.path) as pdf:
            if not 1 <= page <= pdf.page_count:
                raise ApiError(404, f"document {doc_id!r} has pages 1 to {pdf.page_count}, not {page}")
            pg = pdf[page - 1]
            recorded = self.recorded_table(doc_id, highlight) if highlight else None
            if recorded is not None:  # a table kept as a record: its cell, row label and header
                para, children = recorded
                texts = []
                painted = [r for v in (value, *more) for r in cell_rects(para, children, sentences, v)]
                tables = [r for r in dict.fromkeys(painted) if r[0] == page]
            else:
                texts = [s for s in sentences if not is_table(s)]
                tables = [r for s in sentences if is_table(s) for r in table_rects(s, value) if r[0] == page]
            for r in [*snapped_rects(pg, texts, page), *tables]:
                pg.draw_rect(
                    pymupdf.Rect(r[1:]), color=None, fill=HIGHLIGHT, fill_opacity=HIGHLIGHT_OPACITY, overlay=True
                )
            png: bytes = pg.get_pixmap(dpi=dpi).tobytes("png")
        return png

    def marked_text(
        self, doc_id: str, node_id: str, value: str | None = None, more: Sequence[str] = ()
    ) -> dict[str, object]:
        """A node's paragraph with the node's sentences marked, for documents without pages
        (and for the text beside a page image): `parts` alternate plain and marked text. In
        a cited table, the caption and the rows stating `value` are marked."""
        node = self.node(doc_id, node_id)
        para = node
        if node.kind is NodeKind.SENTENCE and node.parent_id is not None:
            para = self.node(doc_id, node.parent_id)
        if para.table is not None:
            rows = [i for i in [row_index(para, node)] if i is not None]
            return {"doc_id": doc_id, "node_id": node_id, "paragraph_id": para.node_id, "page": para.page,
                    "parts": _union(record_parts(para.table, v or "", rows) for v in (value, *more)),
                    "cell": cell_citation(para.table, value or "", rows)}  # fmt: skip
        if is_table(para) and value and stating_rows(para.text, value):
            return {"doc_id": doc_id, "node_id": node_id, "paragraph_id": para.node_id, "page": para.page,
                    "parts": table_parts(para.text, value)}  # fmt: skip
        marked = {s.text for s in self.sentences(doc_id, node_id)} if node.kind is NodeKind.SENTENCE else set()
        parts: list[dict[str, object]] = []
        text = para.text
        cursor = 0
        for s in self.sentences(doc_id, para.node_id):
            if s.text not in marked:
                continue
            at = text.find(s.text, cursor)
            if at < 0:
                continue
            if at > cursor:
                parts.append({"text": text[cursor:at], "marked": False})
            parts.append({"text": s.text, "marked": True})
            cursor = at + len(s.text)
        if cursor < len(text):
            parts.append({"text": text[cursor:], "marked": False})
        if not marked:  # a paragraph asked for: all of it is the evidence
            parts = [{"text": text, "marked": True}]
        return {"doc_id": doc_id, "node_id": node_id, "paragraph_id": para.node_id, "page": para.page, "parts": parts}


def table_parts(text: str, value: str) -> list[dict[str, object]]:
    """A table's lines, the caption and the rows stating the value marked."""
    caption, rows = table_lines(text)
    stating = set(stating_rows(text, value))
    lines = [(caption, True)] if caption else []
    lines += [(row, i in stating) for i, row in enumerate(rows)]
    return [{"text": line + "\n", "marked": marked} for line, marked in lines]


def snapped_rects(page: pymupdf.Page, sentences: list[Node], page_no: int) -> list[Rect]:
    """The sentences' boxes on this page, their ends moved onto the words that open and
    close each sentence. The tree's boxes split a line by its share of characters, which
    can miss by part of a word in a proportional font; the page's own word boxes fix that."""
    words = page.get_text("words") if sentences else []
    out: list[Rect] = []
    for s in sentences:
        tokens = s.text.split()
        last = len(s.rects) - 1
        for i, r in enumerate(s.rects):
            if r[0] != page_no:
                continue
            x0, x1 = r[1], r[3]
            line = [w for w in words if r[2] <= (w[1] + w[3]) / 2 <= r[4]]
            if i == 0 and tokens:
                x0 = _nearest(line, tokens[0], x0, start=True)
            if i == last and tokens:
                x1 = _nearest(line, tokens[-1], x1, start=False)
            out.append((page_no, x0, r[2], x1, r[4]))
    return out


def _nearest(line: list[tuple], token: str, x: float, start: bool) -> float:
    """The start (or end) of the word of this line spelled like `token` closest to x; x
    itself when none is within a few words of it."""
    edge = 0 if start else 2
    matches = [w[edge] for w in line if w[4] == token]
    if not matches:
        return x
    best = min(matches, key=lambda v: abs(v - x))
    return float(best) if abs(best - x) < 60 else x


def _title(doc_id: str, row: dict[str, str], nodes: list[Node]) -> str:
    """metadata.csv's title; without one, the title the parser read from the document (a PDF's
    metadata or its first page's heading), never the file name when there is another."""
    file_name = Path(row["path"]).stem
    parsed = next((n.title for n in nodes if n.kind is NodeKind.DOCUMENT), "")
    for title in (row["title"], parsed):
        if title and title.strip() and title.strip() not in (doc_id, file_name):
            return title.strip()
    return doc_id


def _union(readings: Iterable[list[dict[str, object]]]) -> list[dict[str, object]]:
    """The same lines, each marked where any reading marks it."""
    out: list[dict[str, object]] = []
    for parts in readings:
        if not out:
            out = [dict(p) for p in parts]
            continue
        for mine, theirs in zip(out, parts, strict=True):
            mine["marked"] = bool(mine["marked"]) or bool(theirs["marked"])
    return out
