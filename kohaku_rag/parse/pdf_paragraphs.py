"""Lines into paragraphs and paragraphs into sections, in reading order: the assembler
(where a paragraph breaks), footnotes as floats, a paper's sections and a slide deck's."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from kohaku_rag.document.tree import ParsedParagraph, ParsedSection, TextLine
from kohaku_rag.parse.pdf_headings import Outline, TextStyle, heading_text, is_heading
from kohaku_rag.parse.pdf_layout import Line, Placed, merge_lines_text, segment_lefts
from kohaku_rag.parse.pdf_page_items import PdfFloat, PdfPage, union_bbox

_FOOTNOTE = re.compile(r"^(?:\d{1,2}|[∗*†‡§¶])\s*\S")
_ITEM_START = re.compile(r"^(?:\[\d{1,3}\]|[•●▪■◦‣∙–-]|\d{1,2}[.)])\s")
_SENTENCE_END = re.compile(r"[.!?:]['\")\]]*$")


class _Assembler:
    """Collects lines into paragraphs and paragraphs into sections, in reading order."""

    def __init__(
        self, body: float, lefts: dict[tuple[int, str], float], pitch: float, vocabulary: frozenset[str] = frozenset()
    ) -> None:
        self.body = body
        self.vocabulary = vocabulary
        self.lefts = lefts
        self.pitch = pitch
        self.sections: list[tuple[str, int | None, list[ParsedParagraph]]] = []
        self.lines: list[Placed] = []
        self.deferred: list[PdfFloat] = []

    def start_section(self, title: str, page: int | None) -> None:
        self.flush()
        self.sections.append((title, page, []))

    def add_line(self, p: Placed, nxt: Line | None) -> None:
        """`nxt` is the following line of the same column segment, if any: indents are
        judged against the lines around, not against a page-wide margin."""
        if self.lines and self._breaks(p, nxt):
            self.flush()
        self.lines.append(p)

    def add_float(self, f: PdfFloat) -> None:
        # a float between two halves of a sentence waits until the paragraph ends
        if self.lines and not _SENTENCE_END.search(self.lines[-1].item.text):  # type: ignore[attr-defined]
            self.deferred.append(f)
        else:
            self.flush()
            self._emit(f.paragraph)

    def flush(self) -> None:
        if self.lines:
            lines: list[Line] = [p.item for p in self.lines]  # type: ignore[misc]
            first_page = [ln for ln in lines if ln.page == lines[0].page]
            text = merge_lines_text([ln.text for ln in lines], self.vocabulary)
            box = union_bbox([ln.bbox for ln in first_page])
            self._emit(ParsedParagraph(text, lines[0].page, box, lines=_text_lines(lines)))
            self.lines = []
        for f in self.deferred:
            self._emit(f.paragraph)
        self.deferred = []

    def _emit(self, para: ParsedParagraph) -> None:
        if not self.sections:
            self.sections.append(("", para.page, []))
        self.sections[-1][2].append(para)

    def _breaks(self, b: Placed, c: Line | None) -> bool:
        a = self.lines[-1]
        la: Line = a.item  # type: ignore[assignment]
        lb: Line = b.item  # type: ignore[assignment]
        if a.page == b.page and (_is_fragment(la, self.body) or _is_fragment(lb, self.body)):
            return False  # a stacked fraction's "1" or a lone sub/superscript
        if abs(la.size - lb.size) > 0.8:
            return True
        tol = 0.6 * lb.size
        if c is not None and _ITEM_START.match(c.text) and not _ITEM_START.match(lb.text) and lb.x0 - c.x0 >= tol:
            return False  # the indented last line of a list entry or reference
        ends = bool(_SENTENCE_END.search(la.text))
        if ends and _ITEM_START.match(lb.text):
            return True  # next list item or reference
        if la.bold != lb.bold and ((la.bold and len(la.text) <= 80) or (lb.bold and len(lb.text) <= 80 and ends)):
            return True  # a bold label line ("MS COCO", a slide's block title) stands alone
        if c is None:
            ref = self.lefts.get((b.page, b.column), lb.x0)
        else:
            ref = c.x0
        # reference lists: an entry's first line sticks out left of its continuation (a
        # line ending a sentence above an indented one is a paragraph end instead)
        hanging = c is not None and c.x0 - lb.x0 >= tol and not _SENTENCE_END.search(lb.text)
        if _segment(a) != _segment(b):
            # column or page break: the paragraph goes on unless the new column starts
            # with an indent or a hanging line, or the last one ended a sentence
            return lb.x0 - ref >= tol or hanging or ends
        step = lb.baseline - la.baseline
        if step <= 0 or step > self.pitch * la.size / self.body + 0.35 * la.size:
            return True
        first_indent = lb.x0 - la.x0 >= tol and lb.x0 - ref >= tol and ends
        before = self.lines[-2].item if len(self.lines) > 1 and _segment(self.lines[-2]) == _segment(a) else None
        a_was_indented = isinstance(before, Line) and la.x0 - before.x0 >= tol
        outdent = la.x0 - lb.x0 >= tol and (hanging or (ends and not a_was_indented))
        return first_indent or outdent


def _text_lines(lines: Sequence[Line]) -> tuple[TextLine, ...]:
    """The paragraph's lines as the tree keeps them, to place each sentence on its page."""
    return tuple(TextLine(ln.page, ln.bbox, ln.text) for ln in lines)


def _is_fragment(ln: Line, body: float) -> bool:
    chars = ln.text.replace(" ", "")
    return len(chars) <= 3 and (ln.size <= 0.85 * body or not any(ch.isalpha() for ch in chars))


def _next_in_segment(placed: Sequence[Placed], i: int) -> Line | None:
    for q in placed[i + 1 :]:
        if _segment(q) != _segment(placed[i]):
            return None
        if isinstance(q.item, Line):
            return q.item
    return None


def _line_pitch(placed: Sequence[Placed], body: float) -> float:
    """Most common baseline distance between consecutive body lines of one column."""
    steps: Counter[float] = Counter()
    for a, b in zip(placed, placed[1:]):
        if not (isinstance(a.item, Line) and isinstance(b.item, Line)):
            continue
        if (a.page, a.column, a.band) != (b.page, b.column, b.band):
            continue
        if abs(a.item.size - body) > 0.6 or abs(b.item.size - body) > 0.6:
            continue
        step = b.item.baseline - a.item.baseline
        if 0.9 * body <= step <= 1.8 * body:
            steps[round(step * 2) / 2] += 1
    return steps.most_common(1)[0][0] if steps else 1.2 * body


def paper_sections(
    placed: Sequence[Placed],
    pages: Sequence[PdfPage],
    style: TextStyle,
    doc_title: str,
    outline: Outline | None,
    vocabulary: frozenset[str],
) -> list[ParsedSection]:
    body = style.body
    placed = _footnotes_as_floats(placed, body, [pg.height for pg in pages])
    asm = _Assembler(body, segment_lefts(placed), _line_pitch(placed, body), vocabulary)
    front = True  # still before the first real heading
    front_title = ""
    i = 0
    while i < len(placed):
        p = placed[i]
        if isinstance(p.item, PdfFloat):
            asm.add_float(p.item)
            i += 1
            continue
        ln: Line = p.item  # type: ignore[assignment]
        if not is_heading(ln, style, outline, front):
            asm.add_line(p, _next_in_segment(placed, i))
            i += 1
            continue
        heading, i = heading_text(placed, i)
        if front and heading.rstrip(".:").lower() == "abstract":
            front_title = "Abstract"
            asm.flush()
            continue
        if front:
            asm.flush()
            front = False
        asm.start_section(heading, ln.page)
    asm.flush()
    sections = []
    for k, (title, page, paras) in enumerate(asm.sections):
        if k == 0 and not title:
            title = front_title or doc_title or "Front matter"
        sections.append(ParsedSection(title, tuple(paras), page))
    return sections


def _segment(p: Placed) -> tuple[int, str, int]:
    return (p.page, p.column, p.band)


def _footnotes_as_floats(placed: Sequence[Placed], body: float, heights: Sequence[float]) -> list[Placed]:
    """Footnotes at the foot of a column become floats, so the paragraph they interrupt
    continues in the next column and the footnote follows it."""
    out: list[Placed] = []
    i = 0
    while i < len(placed):
        p = placed[i]
        prev = placed[i - 1] if i else None
        if (
            isinstance(p.item, Line)
            and p.item.size <= 0.9 * body
            and _FOOTNOTE.match(p.item.text)
            and p.item.y0 > 0.5 * heights[p.page - 1]
            # footnotes follow body text
            and prev is not None
            and isinstance(prev.item, Line)
            and _segment(prev) == _segment(p)
            and prev.item.size > 0.9 * body
        ):
            j = i + 1
            while (
                j < len(placed)
                and isinstance(placed[j].item, Line)
                and _segment(placed[j]) == _segment(p)
                and placed[j].item.size <= 0.9 * body  # type: ignore[attr-defined]
            ):
                j += 1
            if j == len(placed) or _segment(placed[j]) != _segment(p):
                lines: list[Line] = [q.item for q in placed[i:j]]  # type: ignore[misc]
                bbox = union_bbox([ln.bbox for ln in lines])
                text = merge_lines_text([ln.text for ln in lines])
                para = ParsedParagraph(text, p.page, bbox, lines=_text_lines(lines))
                out.append(Placed(PdfFloat(bbox, para), p.page, p.column, p.band))
                i = j
                continue
        out.append(p)
        i += 1
    return out


def slide_sections(pages: Sequence[PdfPage], placed: Sequence[Sequence[Placed]], body: float) -> list[ParsedSection]:
    """One section per slide, titled by the largest text in the top part of the slide."""
    flat = [p for pp in placed for p in pp]
    lefts = segment_lefts(flat)
    pitch = _line_pitch(flat, body)
    sections: list[ParsedSection] = []
    for pg, items in zip(pages, placed):
        lines = [p.item for p in items if isinstance(p.item, Line)]
        top = [ln for ln in lines if ln.y0 < 0.3 * pg.height]
        title_lines: list[Line] = []
        if top:
            biggest = max(ln.size for ln in top)
            cands = sorted((ln for ln in top if ln.size >= biggest - 0.3), key=lambda ln: ln.y0)
            title_lines = [cands[0]]
            for ln in cands[1:]:
                if ln.y0 - title_lines[-1].y1 > 1.2 * ln.size:
                    break
                title_lines.append(ln)
        title = merge_lines_text([ln.text for ln in title_lines]) or f"Slide {pg.number}"
        asm = _Assembler(body, lefts, pitch)
        asm.start_section(title, pg.number)
        skip = set(title_lines)
        body_items = [p for p in items if p.item not in skip]
        for k, p in enumerate(body_items):
            if isinstance(p.item, PdfFloat):
                asm.add_float(p.item)
            else:
                asm.add_line(p, _next_in_segment(body_items, k))
        asm.flush()
        sections.append(ParsedSection(title, tuple(asm.sections[0][2]), pg.number))
    return sections
