"""What retrieval hands the answering stage: context items (a snippet with where it comes
from), their section headings, and packing them into a character budget."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kohaku_rag.document.table_record import TableRecord, record_from_arrow, record_to_arrow, table_text, with_rows
from kohaku_rag.document.tree import Node, NodeKind

MEDIA_ATTACHMENTS = ("table", "image", "page")  # what `content = "text"` leaves out
IMAGE_ATTACHMENTS = ("image", "page")  # what the separate image search finds: figures, page renderings
_PAGE_TITLE = re.compile(r"^\s*(page|slide)\s*\d+\s*$", re.I)


@dataclass(frozen=True)
class ContextItem:
    doc_id: str
    node_id: str
    kind: str
    page: int | None
    score: float
    text: str
    attachment: str = "text"
    # Where the snippet sits, for the prompt: the document's title and the heading of the
    # section holding it ("" when unknown, e.g. flat chunks).
    doc_title: str = ""
    section: str = ""
    marks: tuple[str, ...] = ()  # sentences of `text` that best match the question
    media_hash: str | None = None  # a figure's image in the lake (`Lake.blob`)
    # A table kept as a record travels with its item from the index to the prompt: `text` is
    # made from it (table_record.table_text), never parsed back into rows and columns.
    table: TableRecord | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "marks", tuple(self.marks))  # lists, when read back from JSON
        if isinstance(self.table, dict):  # read back from JSON
            object.__setattr__(self, "table", record_from_arrow(self.table, self.page))

    def as_dict(self) -> dict[str, object]:
        return {
            "doc_id": self.doc_id,
            "node_id": self.node_id,
            "kind": self.kind,
            "page": self.page,
            "score": round(self.score, 6),
            "text": self.text,
            "attachment": self.attachment,
            "doc_title": self.doc_title,
            "section": self.section,
            "marks": list(self.marks),
            "media_hash": self.media_hash,
            "table": record_to_arrow(self.table) if self.table is not None else None,
        }


def pack(items: Sequence[ContextItem], budget_chars: int) -> list[ContextItem]:
    """Keep items in rank order while they fit; the first that does not fit is cut to the
    remaining budget so the budget is used, never exceeded."""
    out: list[ContextItem] = []
    used = 0
    for item in items:
        room = budget_chars - used
        if room <= 0:
            break
        if len(item.text) > room:
            if room >= 200 and item.table is None:
                out.append(ContextItem(**{**item.__dict__, "text": item.text[:room]}))
            elif room >= 200:  # a table is cut at a row, so its text and record still agree
                out.append(fit_table(item, room))
            break
        out.append(item)
        used += len(item.text)
    return out


def fit_table(item: ContextItem, chars: int) -> ContextItem:
    """A table item cut to its first rows that fit in `chars` (its caption always kept)."""
    assert item.table is not None
    keep = len(item.table.rows)
    while keep > 0 and len(table_text(with_rows(item.table, range(keep)))) > chars:
        keep -= 1
    table = with_rows(item.table, range(keep))
    return replace(item, text=table_text(table), table=table)


def section_heading(node: Node | None) -> str:
    """A section's title as a heading for its snippets; page-per-section payloads (titles
    like "Page 3") have none worth showing."""
    if node is None or node.kind != NodeKind.SECTION or _PAGE_TITLE.match(node.title):
        return ""
    return node.title
