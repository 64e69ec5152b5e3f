"""The document tree: document → section → paragraph → sentence.

Parsers do not build nodes themselves; they return `ParsedSection`s holding
`ParsedParagraph`s and `build_tree` turns those into `Node` records with the ids
`doc:sec{i}:p{j}:s{k}` (1-based), so id rules live in exactly one place.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import pyarrow as pa

from kohaku_rag.document.table_record import (
    TABLE_TYPE,
    BBox,
    TableRecord,
    record_from_arrow,
    record_to_arrow,
    row_sentence,
    table_text,
)


class NodeKind(StrEnum):
    DOCUMENT = "document"
    SECTION = "section"
    PARAGRAPH = "paragraph"
    SENTENCE = "sentence"


class Attachment(StrEnum):
    """What a paragraph holds: running text, a table, a figure, or (the `page_images`
    index option) the rendering of a whole PDF page, searched by its image vector alone."""

    TEXT = "text"
    TABLE = "table"
    IMAGE = "image"
    PAGE = "page"


# Where a sentence sits on a page: (page, x0, y0, x1, y1), one per text line it covers.
Rect = tuple[int, float, float, float, float]


@dataclass(frozen=True)
class TextLine:
    """One line of a PDF paragraph as laid out: its page, box and text."""

    page: int
    bbox: BBox
    text: str


@dataclass(frozen=True)
class Node:
    node_id: str
    doc_id: str
    parent_id: str | None
    kind: NodeKind
    ordinal: int
    title: str
    text: str
    page: int | None = None
    bbox: BBox | None = None
    attachment: Attachment = Attachment.TEXT
    media_hash: str | None = None
    # A PDF sentence's line boxes, for the page highlight: layout kept in the tree table
    # only (the vector store does not hold it), so it is not part of a node's identity.
    rects: tuple[Rect, ...] = field(default=(), compare=False)
    # A table paragraph's structure (its rows are its sentences, after the caption's):
    # kept in the tree table only, like `rects`.
    table: TableRecord | None = field(default=None, compare=False)

    @property
    def length(self) -> int:
        return len(self.text)


@dataclass(frozen=True)
class ParsedParagraph:
    """A paragraph as a parser sees it, before ids and sentences exist.

    For figures, `image` holds PNG bytes (stored in the lake by content hash) and
    `text` the caption found in the PDF ("Figure 3: ..."), possibly empty.
    """

    text: str
    page: int | None = None
    bbox: BBox | None = None
    attachment: Attachment = Attachment.TEXT
    image: bytes | None = None
    lines: tuple[TextLine, ...] = ()  # the PDF lines the text was merged from, in order
    table: TableRecord | None = None  # a table's caption, columns and rows, when aligned


@dataclass(frozen=True)
class ParsedSection:
    title: str
    paragraphs: Sequence[ParsedParagraph]
    page: int | None = None


@dataclass(frozen=True)
class ParsedDocument:
    doc_id: str
    title: str
    sections: Sequence[ParsedSection]
    metadata: dict[str, str] = field(default_factory=dict)


def media_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def section_id(doc_id: str, i: int) -> str:
    return f"{doc_id}:sec{i}"


def paragraph_id(doc_id: str, i: int, j: int) -> str:
    return f"{doc_id}:sec{i}:p{j}"


def sentence_id(doc_id: str, i: int, j: int, k: int) -> str:
    return f"{doc_id}:sec{i}:p{j}:s{k}"


def build_tree(doc: ParsedDocument, split_sentences: Callable[[str], list[str]]) -> list[Node]:
    """Nodes in pre-order. Empty paragraphs and untitled empty sections are dropped; a figure
    without caption text keeps one empty-text sentence-free paragraph so its
    image still reaches the caption step."""
    doc_id = doc.doc_id
    sections: list[tuple[Node, list[Node]]] = []
    i = 0
    for sec in doc.sections:
        body: list[Node] = []
        j = 0
        sid = section_id(doc_id, i + 1)
        for para in sec.paragraphs:
            text = (table_text(para.table) if para.table is not None else para.text).strip()
            if not text and para.image is None:
                continue
            j += 1
            pid = paragraph_id(doc_id, i + 1, j)
            body.append(
                Node(
                    node_id=pid,
                    doc_id=doc_id,
                    parent_id=sid,
                    kind=NodeKind.PARAGRAPH,
                    ordinal=j,
                    title="",
                    text=text,
                    page=para.page,
                    bbox=para.bbox,
                    attachment=para.attachment,
                    media_hash=media_hash(para.image) if para.image is not None else None,
                    table=para.table,
                )
            )
            if para.table is not None:
                body.extend(table_sentences(doc_id, i + 1, j, para))
                continue
            sentences = [para.text.strip()] if para.attachment is Attachment.TABLE else split_sentences(text)
            spans = sentence_spans(text, [s.strip() for s in sentences if s.strip()])
            for k, (sent, span) in enumerate(zip((s for s in sentences if s.strip()), spans, strict=True), start=1):
                body.append(sentence_node(doc_id, i + 1, j, k, sent.strip(), para, sentence_rects(para, text, span)))
        if j == 0 and not sec.title.strip():
            continue  # a heading-only section ("3. Method" before "3.1 ...") is kept: it is structure
        i += 1
        paragraphs_text = "\n\n".join(n.text for n in body if n.kind is NodeKind.PARAGRAPH and n.text)
        sec_node = Node(
            node_id=sid,
            doc_id=doc_id,
            parent_id=doc_id,
            kind=NodeKind.SECTION,
            ordinal=i,
            title=sec.title.strip(),
            text=paragraphs_text,
            page=sec.page if sec.page is not None else next((n.page for n in body if n.page is not None), None),
        )
        sections.append((sec_node, body))
    root = Node(
        node_id=doc_id,
        doc_id=doc_id,
        parent_id=None,
        kind=NodeKind.DOCUMENT,
        ordinal=0,
        title=doc.title,
        text="\n\n".join(s.text for s, _ in sections),
        page=1 if sections else None,
    )
    nodes = [root]
    for sec_node, body in sections:
        nodes.append(sec_node)
        nodes.extend(body)
    return nodes


def table_sentences(doc_id: str, i: int, j: int, para: ParsedParagraph) -> list[Node]:
    """A table's sentence-level nodes: its caption, then one node per row whose text names
    the table and the columns (table_record.row_sentence), each with its row's box."""
    assert para.table is not None
    table = para.table
    whole: tuple[Rect, ...] = ((para.page, *para.bbox),) if para.page is not None and para.bbox is not None else ()
    caption_rects = tuple(
        (ln.page, *ln.bbox) for ln in para.lines if ln.text.strip() and ln.text.strip() in table.caption
    )
    texts: list[tuple[str, tuple[Rect, ...]]] = []
    if table.caption:
        texts.append((table.caption, caption_rects or whole))
    for row in table.rows:
        rect = ((para.page, *row.bbox),) if para.page is not None and row.bbox is not None else whole
        texts.append((row_sentence(table, row), rect))
    return [sentence_node(doc_id, i, j, k, text, para, rects) for k, (text, rects) in enumerate(texts, start=1)]


def sentence_node(
    doc_id: str, i: int, j: int, k: int, text: str, para: ParsedParagraph, rects: tuple[Rect, ...]
) -> Node:
    """Sentence k of paragraph j of section i (1-based), on its paragraph's page."""
    return Node(
        node_id=sentence_id(doc_id, i, j, k),
        doc_id=doc_id,
        parent_id=paragraph_id(doc_id, i, j),
        kind=NodeKind.SENTENCE,
        ordinal=k,
        title="",
        text=text,
        page=para.page,
        bbox=None,
        attachment=para.attachment,
        rects=rects,
    )


def sentence_spans(text: str, sentences: Sequence[str]) -> list[tuple[int, int]]:
    """Each sentence's (start, end) in its paragraph's text, found in order (a sentence the
    splitter rewrote and that cannot be found takes the text after the previous one)."""
    spans: list[tuple[int, int]] = []
    cursor = 0
    for sent in sentences:
        at = text.find(sent, cursor)
        if at < 0:
            at = min(cursor, len(text))
            spans.append((at, min(len(text), at + len(sent))))
        else:
            spans.append((at, at + len(sent)))
        cursor = spans[-1][1]
    return spans


def _line_starts(lines: Sequence[TextLine], text: str) -> list[int]:
    """Where each PDF line starts in the merged paragraph text. Merging joins lines with a
    space or drops an end-of-line hyphen, so each line is looked up by its first characters."""
    starts: list[int] = []
    cursor = 0
    for ln in lines:
        head = ln.text.strip()[:12]
        at = text.find(head, cursor) if head else -1
        at = cursor if at < 0 else at
        starts.append(at)
        cursor = at + max(1, len(head))
    return starts


def sentence_rects(para: ParsedParagraph, text: str, span: tuple[int, int]) -> tuple[Rect, ...]:
    """The boxes a sentence covers: per PDF line, the share of the line's width its
    characters take (proportional spacing is close enough to mark the sentence). A
    paragraph without lines (a table) gives its whole box."""
    if not para.lines:
        if para.page is None or para.bbox is None:
            return ()
        return ((para.page, *para.bbox),)
    starts = _line_starts(para.lines, text)
    ends = [*starts[1:], len(text)]
    a, b = span
    out: list[Rect] = []
    for ln, s, e in zip(para.lines, starts, ends):
        lo, hi = max(a, s), min(b, e)
        if hi <= lo or e <= s:
            continue
        x0, y0, x1, y1 = ln.bbox
        width = x1 - x0
        f0, f1 = (lo - s) / (e - s), min(1.0, (hi - s) / (e - s))
        out.append((ln.page, x0 + f0 * width, y0, x0 + f1 * width, y1))
    return tuple(out)


TREE_SCHEMA = pa.schema(
    [
        pa.field("node_id", pa.string(), nullable=False),
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("parent_id", pa.string()),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("ordinal", pa.int32(), nullable=False),
        pa.field("title", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("page", pa.int32()),
        pa.field("bbox", pa.list_(pa.float32(), 4)),
        pa.field("attachment", pa.string(), nullable=False),
        pa.field("media_hash", pa.string()),
        pa.field("length", pa.int32(), nullable=False),
        # (page, x0, y0, x1, y1) per line a PDF sentence covers; empty for other nodes
        pa.field("rects", pa.list_(pa.list_(pa.float32(), 5))),
        # a table paragraph's caption, columns, rows and cell boxes (table_record.py)
        pa.field("table", TABLE_TYPE),
    ]
)


def nodes_to_table(nodes: Iterable[Node]) -> pa.Table:
    rows = [
        {
            "node_id": n.node_id,
            "doc_id": n.doc_id,
            "parent_id": n.parent_id,
            "kind": str(n.kind),
            "ordinal": n.ordinal,
            "title": n.title,
            "text": n.text,
            "page": n.page,
            "bbox": list(n.bbox) if n.bbox is not None else None,
            "attachment": str(n.attachment),
            "media_hash": n.media_hash,
            "length": n.length,
            "rects": [list(r) for r in n.rects],
            "table": record_to_arrow(n.table) if n.table is not None else None,
        }
        for n in nodes
    ]
    return pa.Table.from_pylist(rows, schema=TREE_SCHEMA)


def table_to_nodes(table: pa.Table) -> list[Node]:
    return [
        Node(
            node_id=r["node_id"],
            doc_id=r["doc_id"],
            parent_id=r["parent_id"],
            kind=NodeKind(r["kind"]),
            ordinal=r["ordinal"],
            title=r["title"],
            text=r["text"],
            page=r["page"],
            bbox=tuple(r["bbox"]) if r["bbox"] is not None else None,
            attachment=Attachment(r["attachment"]),
            media_hash=r["media_hash"],
            rects=tuple((int(q[0]), q[1], q[2], q[3], q[4]) for q in r.get("rects") or ()),
            table=record_from_arrow(r.get("table"), r["page"], tuple(r["bbox"]) if r["bbox"] is not None else None),
        )
        for r in table.to_pylist()
    ]
