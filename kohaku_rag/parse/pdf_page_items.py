"""A PDF page as the parser holds it: its text lines and its floats (tables and figures)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kohaku_rag.document.tree import BBox, ParsedParagraph
from kohaku_rag.parse.pdf_layout import Line


@dataclass(frozen=True)
class PdfFloat:
    """A table or figure paragraph anchored at its place on the page."""

    bbox: BBox
    paragraph: ParsedParagraph


@dataclass
class PdfPage:
    """One page: its lines in the order read so far, and the floats taken out of them."""

    number: int  # 1-based
    width: float
    height: float
    lines: list[Line]
    floats: list[PdfFloat] = field(default_factory=list)


def union_bbox(boxes: Sequence[BBox]) -> BBox:
    """The smallest box holding all of `boxes`."""
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))
