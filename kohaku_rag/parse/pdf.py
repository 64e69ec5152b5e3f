"""PDF → ParsedDocument with PyMuPDF.

Sections come from the PDF's outline (bookmarks) when it has one: each entry is placed on
its heading line by page and title (numbering, case and wrapping aside), and the layout
decides on pages where an entry was not found and after the outline's last entry
(appendices); the abstract and references count even when the outline leaves them out.
Without an outline, a heading is a short, title-like line set apart from the body (larger,
bold, or another font at body size) that is numbered ("3", "3.2", "A.1", "IV."), a known
name ("References"), large and bold, or in a style that recurs as standalone lines on more
than one page (publisher headings: bold sans at 1.1x a serif body). Text before the first
heading (title, authors, abstract) forms the first section; a recurring style alone makes
no heading there, so author names are not sections.

Per page, running headers/footers and page numbers are removed, tables
(`find_tables`) and figures (`pdf_figures.find_figures`) become their own
paragraphs with their captions, and the remaining lines are read column by column.
Paragraphs break at a vertical gap larger than the line pitch, at a first-line indent
and at a change of font size. Slide decks get one section per slide instead.
"""

from __future__ import annotations

import difflib
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf

from kohaku_rag.errors import DocumentError
from kohaku_rag.parse import limits
from kohaku_rag.parse.pdf_figures import FigureCandidate, find_figures
from kohaku_rag.parse.pdf_layout import (
    Line,
    Placed,
    body_size,
    find_gutter,
    margin_lines,
    merge_lines_text,
    page_lines,
    reading_order,
    segment_lefts,
    vocabulary_of,
)
from kohaku_rag.parse.pdf_tables import find_page_tables, page_words
from kohaku_rag.tree import Attachment, BBox, ParsedDocument, ParsedParagraph, ParsedSection, TextLine

MIN_TEXT_CHARS = 20  # below this a PDF has no usable text layer
SLIDE_ASPECTS = (4 / 3, 16 / 9, 16 / 10)
SLIDE_MAX_CHARS = 1200  # median characters per page; papers have 3,000+

_NUMBERED = re.compile(
    r"^(?:\d{1,2}(?:\.\d{1,2}){0,3}\.?|[A-Z]\.(?:\d{1,2}\.?){0,3}|[A-Z](?:\.\d{1,2}){1,3}\.?"
    r"|(?=[IVX])X{0,3}(?:IX|IV|V?I{0,3})\.)\s+(?=[A-Z])"
)
_KNOWN_HEADINGS = frozenset(
    {
        "abstract",
        "introduction",
        "references",
        "bibliography",
        "acknowledgements",
        "acknowledgments",
        "acknowledgement",
        "acknowledgment",
        "appendix",
        "appendices",
        "conclusion",
        "conclusions",
        "related work",
        "discussion",
        "summary",
        "supplementary material",
        "contents",
    }
)
_CAPTION = re.compile(r"^(table|tab\.|figure|fig\.)\s*(\d+|[A-Z]\.?\d*)\s*[.:|]?", re.IGNORECASE)
_FOOTNOTE = re.compile(r"^(?:\d{1,2}|[∗*†‡§¶])\s*\S")
_ITEM_START = re.compile(r"^(?:\[\d{1,3}\]|[•●▪■◦‣∙–-]|\d{1,2}[.)])\s")
_SENTENCE_END = re.compile(r"[.!?:]['\")\]]*$")
_BAD_META_TITLE = re.compile(
    r"\.(pdf|docx?|tex|dvi|pptx?|indd|rtf)$|^untitled|^microsoft (word|powerpoint)|[\\/]", re.I
)
_NORM = re.compile(r"[^a-z0-9]+")
_RUN_IN = re.compile(r"[a-z]\.\s+\S")
# Math fonts set formulas apart from the body too; a line in one is never a heading.
_MATH_FONT = re.compile(r"^(?:CMMI|CMSY|CMEX|MSBM|MSAM|STIXMath|Cambria-?Math|Symbol)|Math", re.IGNORECASE)


@dataclass(frozen=True)
class PdfFloat:
    """A table or figure paragraph anchored at its place on the page."""

    bbox: BBox
    paragraph: ParsedParagraph


@dataclass
class _Page:
    number: int  # 1-based
    width: float
    height: float
    lines: list[Line]
    floats: list[PdfFloat] = field(default_factory=list)


def parse_pdf(path: Path, doc_id: str, *, title: str | None = None, use_outline: bool = True) -> ParsedDocument:
    """Parse one PDF into sections and paragraphs (sentences are split later by
    `build_tree`). Unreadable, encrypted, empty and image-only PDFs raise DocumentError."""
    path = Path(path)
    doc = _open(path)
    try:
        mu_pages = _pages(doc, path)
        pages = [_Page(p.number + 1, p.rect.width, p.rect.height, _lines(p, path)) for p in mu_pages]
        _check_text(doc, pages, path)
        slides = _is_slide_deck(pages)
        body = body_size(ln for pg in pages for ln in pg.lines)
        drop = margin_lines([pg.lines for pg in pages], [pg.height for pg in pages], body, slides=slides)
        for pg in pages:
            pg.lines = [ln for ln in pg.lines if ln not in drop]
            _attach_floats(mu_pages[pg.number - 1], pg, path)
            if not slides:
                pg.lines = [ln for ln in pg.lines if not _is_label(ln, body)]
        doc_title, title_source = _document_title(title, doc.metadata or {}, pages)
        placed = [_placed(pg) for pg in pages]
        vocabulary = vocabulary_of(ln for pg in pages for ln in pg.lines)
        source = "slides"
        if slides:
            sections = _slide_sections(pages, placed, body)
        else:
            style = _text_style(pages, body, _title_lines(pages))
            outline = _place_outline(doc.get_toc(simple=True), pages, style) if use_outline else None
            flat = [p for pp in placed for p in pp]
            sections = _paper_sections(flat, pages, style, doc_title, outline, vocabulary)
            source = (
                "layout"
                if outline is None or not outline.keys
                else ("outline" if not outline.unplaced else "outline+layout")
            )
        metadata = {
            "pages": str(len(pages)),
            "layout": "slides" if slides else "document",
            "title_source": title_source,
            "sections_source": source,
        }
        if doc.is_repaired:
            metadata["repaired"] = "true"  # MuPDF rebuilt a damaged cross-reference table
        return ParsedDocument(doc_id=doc_id, title=doc_title, sections=sections, metadata=metadata)
    finally:
        doc.close()


# ---------------------------------------------------------------- opening and checks


def _open(path: Path) -> pymupdf.Document:
    if not path.is_file():
        raise DocumentError(path, "file not found")
    if path.stat().st_size == 0:
        raise DocumentError(path, "empty file (0 bytes)")
    with path.open("rb") as fh:
        if b"%PDF-" not in fh.read(1024):
            raise DocumentError(path, "corrupt or not a PDF: no %PDF- header in the first 1 KiB")
    try:
        doc = pymupdf.open(path, filetype="pdf")
    except (RuntimeError, pymupdf.mupdf.FzErrorBase) as exc:
        raise DocumentError(path, f"corrupt or not a PDF, cannot be opened ({exc})") from exc
    if doc.needs_pass:
        doc.close()
        raise DocumentError(
            path, "encrypted: the PDF needs a password; decrypt it (e.g. `qpdf --decrypt`) and add it again"
        )
    if doc.page_count > limits.MAX_PAGES:
        pages = doc.page_count
        doc.close()
        raise DocumentError(path, f"{pages} pages, over the limit of {limits.MAX_PAGES}; split the PDF")
    if doc.page_count == 0:
        repaired = doc.is_repaired
        doc.close()
        reason = "corrupt: no readable pages (damaged or truncated file)" if repaired else "empty: the PDF has no pages"
        raise DocumentError(path, reason)
    return doc


def _pages(doc: pymupdf.Document, path: Path) -> list[pymupdf.Page]:
    pages = []
    for i in range(doc.page_count):
        try:
            pages.append(doc.load_page(i))
        except (RuntimeError, pymupdf.mupdf.FzErrorBase) as exc:
            raise DocumentError(path, f"corrupt: page {i + 1} cannot be read ({exc})") from exc
    return pages


def _lines(page: pymupdf.Page, path: Path) -> list[Line]:
    try:
        return page_lines(page, page.number + 1)
    except (RuntimeError, pymupdf.mupdf.FzErrorBase) as exc:
        raise DocumentError(path, f"corrupt: the text of page {page.number + 1} cannot be read ({exc})") from exc


def _check_text(doc: pymupdf.Document, pages: Sequence[_Page], path: Path) -> None:
    chars = sum(len(ln.text.replace(" ", "")) for pg in pages for ln in pg.lines)
    if chars > limits.MAX_TEXT_CHARS:
        raise DocumentError(
            path, f"{chars:,} characters of text, over the limit of {limits.MAX_TEXT_CHARS:,}; split the PDF"
        )
    if chars >= MIN_TEXT_CHARS:
        return
    has_images = any(doc[pg.number - 1].get_images() for pg in pages)
    if has_images:
        raise DocumentError(path, f"image-only (scanned) PDF: {len(pages)} page(s) without a text layer; run OCR first")
    raise DocumentError(path, f"empty: no text on any of its {len(pages)} page(s)")


def _is_slide_deck(pages: Sequence[_Page]) -> bool:
    """Landscape 4:3 / 16:9 / 16:10 pages with little text each."""
    landscape = [pg for pg in pages if any(abs(pg.width / pg.height - a) < 0.06 for a in SLIDE_ASPECTS)]
    if len(landscape) < 0.8 * len(pages):
        return False
    per_page = [sum(len(ln.text) for ln in pg.lines) for pg in pages]
    return statistics.median(per_page) <= SLIDE_MAX_CHARS


# ---------------------------------------------------------------- floats: tables and figures


def _find_figures(page: pymupdf.Page, tables: Sequence[BBox]) -> list[FigureCandidate]:
    """The page's figures; a region that is one of the page's tables stays a table."""
    return list(find_figures(page, tables=tables))


def _attach_floats(page: pymupdf.Page, pg: _Page, path: Path) -> None:
    """Turn tables and figures into float paragraphs and drop their text (cells, axis
    labels, captions) from the running lines."""
    try:
        words = page_words(page)
        tables = find_page_tables(page, pg.lines, words)
        figures = _find_figures(page, [t.bbox for t in tables])
    except (RuntimeError, pymupdf.mupdf.FzErrorBase) as exc:
        raise DocumentError(path, f"corrupt: page {pg.number} cannot be analysed ({exc})") from exc

    blocks = _caption_blocks(pg.lines)
    used: set[int] = set()
    consumed: set[Line] = set()
    for tab in tables:
        caption_block = _nearest_caption(blocks, tab.bbox, "tab", used)
        caption = ""
        bbox = tab.bbox
        if caption_block is not None:
            used.add(caption_block)
            cap_lines = blocks[caption_block]
            consumed.update(cap_lines)
            caption = merge_lines_text([ln.text for ln in cap_lines])
            bbox = _union([bbox, *(ln.bbox for ln in cap_lines)])
        text = f"{caption}\n{tab.text()}" if caption else tab.text()
        pg.floats.append(PdfFloat(bbox, ParsedParagraph(text, pg.number, tab.bbox, Attachment.TABLE)))
        consumed.update(ln for ln in pg.lines if _inside(ln.bbox, tab.bbox))
    for fig in figures:
        x0, y0, x1, y1 = (float(v) for v in fig.bbox)
        fig_bbox = (x0, y0, x1, y1)
        bbox = fig_bbox
        caption = (fig.caption or "").strip()
        key = _NORM.sub("", caption.lower())[:40]
        for bno, cap_lines in blocks.items():
            text = _NORM.sub("", merge_lines_text([ln.text for ln in cap_lines]).lower())
            if bno not in used and key and text.startswith(key):
                used.add(bno)
                consumed.update(cap_lines)
                bbox = _union([bbox, *(ln.bbox for ln in cap_lines)])
                break
        para = ParsedParagraph(caption, pg.number, fig_bbox, Attachment.IMAGE, fig.image)
        pg.floats.append(PdfFloat(bbox, para))
        consumed.update(ln for ln in pg.lines if _inside(ln.bbox, fig_bbox))
    pg.lines = [ln for ln in pg.lines if ln not in consumed]


def _caption_blocks(lines: Sequence[Line]) -> dict[int, list[Line]]:
    """PyMuPDF blocks whose first line starts like a caption ("Table 3:", "Fig. 2.")."""
    by_block: dict[int, list[Line]] = defaultdict(list)
    for ln in lines:
        by_block[ln.block].append(ln)
    return {b: ls for b, ls in by_block.items() if _CAPTION.match(min(ls, key=lambda ln: (ln.y0, ln.x0)).text)}


def _nearest_caption(blocks: dict[int, list[Line]], bbox: BBox, kind: str, used: set[int]) -> int | None:
    best: tuple[float, int] | None = None
    for bno, lines in blocks.items():
        first = min(lines, key=lambda ln: (ln.y0, ln.x0)).text.lower()
        if bno in used or not first.startswith(kind):
            continue
        cb = _union([ln.bbox for ln in lines])
        overlap = min(cb[2], bbox[2]) - max(cb[0], bbox[0])
        if overlap < 0.3 * min(cb[2] - cb[0], bbox[2] - bbox[0]):
            continue
        gap = max(bbox[1] - cb[3], cb[1] - bbox[3])
        if -5 <= gap <= 40 and (best is None or gap < best[0]):
            best = (gap, bno)
    return best[1] if best else None


def _is_label(ln: Line, body: float) -> bool:
    """Tiny short text (plot ticks, legend entries) that figure detection left behind."""
    return ln.size < 0.7 * body and len(ln.text.split()) <= 3


def _inside(inner: BBox, outer: BBox, pad: float = 1.5) -> bool:
    cx, cy = (inner[0] + inner[2]) / 2, (inner[1] + inner[3]) / 2
    return outer[0] - pad <= cx <= outer[2] + pad and outer[1] - pad <= cy <= outer[3] + pad


def _union(boxes: Sequence[BBox]) -> BBox:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))


def _placed(pg: _Page) -> list[Placed]:
    gutter = find_gutter(pg.lines, pg.width)
    return reading_order(pg.number, pg.lines, [(f.bbox, f) for f in pg.floats], gutter)


# ---------------------------------------------------------------- titles


def _document_title(given: str | None, meta: dict[str, str], pages: Sequence[_Page]) -> tuple[str, str]:
    if given and given.strip():
        return given.strip(), "argument"
    meta_title = (meta.get("title") or "").strip()
    if len(meta_title) >= 4 and any(c.isalpha() for c in meta_title) and not _BAD_META_TITLE.search(meta_title):
        return meta_title, "metadata"
    lines = _title_lines(pages)
    if lines:
        return merge_lines_text([ln.text for ln in lines]), "page1"
    return "", "none"


def _title_lines(pages: Sequence[_Page]) -> list[Line]:
    """The largest text on page 1 (consecutive lines of that size)."""
    if not pages or not pages[0].lines:
        return []
    first = sorted(pages[0].lines, key=lambda ln: (ln.y0, ln.x0))
    top = max(ln.size for ln in first)
    big = [ln for ln in first if ln.size >= top - 0.3 and not _NUMBERED.match(ln.text)]
    if not big:
        return []
    out = [big[0]]
    for ln in big[1:]:
        if ln.y0 - out[-1].y1 > 1.2 * ln.size:
            break
        out.append(ln)
    return out


# ---------------------------------------------------------------- paragraphs


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
            box = _union([ln.bbox for ln in first_page])
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


# ---------------------------------------------------------------- sections


def _norm(text: str) -> str:
    return _NORM.sub(" ", text.lower()).strip()


@dataclass(frozen=True)
class _LineSet:
    """Lines by place: page, baseline and horizontal extent. Two columns share baselines,
    and reading order may merge a line's pieces ("1" + "Introduction"), so a line is in
    the set when one on its page and baseline overlaps it horizontally."""

    spans: frozenset[tuple[int, int, float, float]] = frozenset()

    @classmethod
    def of(cls, lines: Iterable[Line]) -> _LineSet:
        return cls(frozenset((ln.page, round(ln.baseline), ln.x0, ln.x1) for ln in lines))

    def __contains__(self, ln: object) -> bool:
        assert isinstance(ln, Line)
        where = (ln.page, round(ln.baseline))
        return any(s[:2] == where and s[2] < ln.x1 and ln.x0 < s[3] for s in self.spans)

    def __bool__(self) -> bool:
        return bool(self.spans)


@dataclass(frozen=True)
class _TextStyle:
    """What body text looks like in this document, and the styles its headings recur in."""

    body: float
    body_font: str
    heading_styles: frozenset[tuple[str, float, bool]]
    title_keys: _LineSet  # the document title's lines


@dataclass(frozen=True)
class _Outline:
    """The PDF's bookmarks placed in the text flow: the lines that start each entry."""

    keys: _LineSet  # each placed entry's first line
    unplaced: frozenset[int]  # pages of entries found nowhere (layout decides there)
    last_page: int  # the page of the last entry: layout decides after it (appendices)

    def covers(self, page: int) -> bool:
        return bool(self.keys) and page not in self.unplaced and page <= self.last_page


def _place_outline(toc: Sequence[Sequence[object]], pages: Sequence[_Page], style: _TextStyle) -> _Outline | None:
    """Each bookmark's heading line: on its page (or the next), the first line whose
    text (numbering and case aside) is the entry's title, or begins it when the heading
    wraps, or nearly matches it; lines set apart from the body are tried first, so a
    sentence that happens to end with the same words is not taken. None without an outline."""
    if not toc:
        return None
    found_lines: list[Line] = []
    unplaced: set[int] = set()
    for entry in toc:
        title, page = _norm(_NUMBERED.sub("", str(entry[1]).strip())), int(str(entry[2]))
        candidates = [ln for n in (page, page + 1) if 1 <= n <= len(pages) for ln in pages[n - 1].lines]
        ranked = [ln for ln in candidates if _set_apart(ln, style)] + candidates
        found = next((ln for ln in ranked if _matches(ln, title) and ln not in found_lines), None)
        if found is not None:
            found_lines.append(found)
        elif 1 <= page <= len(pages):
            unplaced.add(page)
    return _Outline(_LineSet.of(found_lines), frozenset(unplaced), max(int(str(e[2])) for e in toc))


def _matches(ln: Line, title: str) -> bool:
    text = _norm(_NUMBERED.sub("", ln.text))
    if not text:
        return False
    wrapped = len(text) >= 8 and title.startswith(text)
    return text == title or wrapped or difflib.SequenceMatcher(None, text, title).ratio() >= 0.9


def is_references(title: str) -> bool:
    """Whether a section is a document's reference list."""
    return _norm(_NUMBERED.sub("", title)) in ("references", "bibliography", "literature cited", "works cited")


def _title_like(text: str) -> bool:
    """Reads as a heading, not a sentence: starts with a capital, no closing punctuation
    of a sentence or clause (a short "Results." still counts)."""
    rest = _NUMBERED.sub("", text).strip()
    words = rest.split()
    if not words or not rest[0].isupper() or rest[-1] in ",;:":
        return False
    if _RUN_IN.search(rest) or "=" in rest:
        return False  # "Residual Representations. In image recognition, ...": a run-in head; a formula
    return not (rest.endswith(".") and len(words) > 4)


def _set_apart(ln: Line, style: _TextStyle) -> bool:
    """Typeset unlike body text: larger, bold, or another font at body size."""
    if ln.size >= 1.2 * style.body - 0.05:
        return True
    if ln.size < style.body - 0.3:
        return False  # captions, footnotes, affiliations
    return ln.bold or (bool(ln.font) and ln.font != style.body_font)


def _shape_ok(text: str) -> bool:
    words = text.split()
    return 2 <= len(text) <= 120 and len(words) <= 16 and any(c.isalpha() for c in text) and text[-1] not in ",;"


def _text_style(pages: Sequence[_Page], body: float, title_lines: Sequence[Line]) -> _TextStyle:
    """The body font, and the heading styles: a style (font, size, weight) set apart from
    the body in which at least two short, title-like lines stand alone, on more than one
    page, and which holds little of the text (a heading style recurs; a bold caption font
    does not stand alone; an author block is on page 1 only)."""
    lines = [ln for pg in pages for ln in pg.lines]
    fonts: Counter[str] = Counter()
    chars: Counter[tuple[str, float, bool]] = Counter()
    for ln in lines:
        chars[ln.style] += len(ln.text)
        if abs(ln.size - body) <= 0.6:
            fonts[ln.font] += len(ln.text)
    body_font = fonts.most_common(1)[0][0] if fonts else ""
    base = _TextStyle(body, body_font, frozenset(), _LineSet.of(title_lines))
    total = sum(chars.values()) or 1
    standalone: Counter[tuple[str, float, bool]] = Counter()
    on_pages: defaultdict[tuple[str, float, bool], set[int]] = defaultdict(set)
    for pg in pages:
        for k, ln in enumerate(pg.lines):
            if ln in base.title_keys or not _shape_ok(ln.text.strip()):
                continue
            # alone in its style: the lines before and after are of another style or block
            around = [pg.lines[j] for j in (k - 1, k + 1) if 0 <= j < len(pg.lines)]
            alone = all(o.style != ln.style or o.block != ln.block for o in around)
            if alone and _set_apart(ln, base) and _title_like(ln.text) and len(ln.text.split()) <= 12:
                standalone[ln.style] += 1
                on_pages[ln.style].add(ln.page)
    # Recurring on more than one page: an author block's names (page 1 only) are no headings.
    several = len(pages) == 1
    styles = frozenset(
        s for s, n in standalone.items() if n >= 2 and chars[s] <= 0.15 * total and (several or len(on_pages[s]) >= 2)
    )
    return _TextStyle(body, body_font, styles, base.title_keys)


def _is_heading(ln: Line, style: _TextStyle, outline: _Outline | None, front: bool = False) -> bool:
    """Whether a line starts a section. In the front matter (before the first numbered or
    named heading) a recurring style alone does not make one: author names are set apart too."""
    if ln in style.title_keys:
        return False
    if outline is not None and outline.keys:
        if ln in outline.keys:
            return True
        if outline.covers(ln.page):
            # The outline decides, except on pages where an entry was not found; outlines
            # often leave out the abstract and the references, so those names still count.
            named = ln.text.strip().rstrip(".:").lower() in _KNOWN_HEADINGS
            return named and _set_apart(ln, style)
    text = ln.text.strip()
    if not _shape_ok(text):
        return False
    words = text.split()
    apart = _set_apart(ln, style)
    strong = ln.size >= 1.2 * style.body - 0.05
    if _NUMBERED.match(text) or text.rstrip(".:").lower() in _KNOWN_HEADINGS:
        # numbered: set apart, or upper case at body size (IEEE's "II. RELATED WORK")
        return apart or (_title_like(text) and _NUMBERED.sub("", text).isupper() and len(words) <= 10)
    if strong and ln.bold and not (text.endswith(".") and len(words) > 6):
        return True
    if front or _MATH_FONT.search(ln.font):
        return False
    return apart and ln.style in style.heading_styles and _title_like(text)


def _paper_sections(
    placed: Sequence[Placed],
    pages: Sequence[_Page],
    style: _TextStyle,
    doc_title: str,
    outline: _Outline | None,
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
        if not _is_heading(ln, style, outline, front):
            asm.add_line(p, _next_in_segment(placed, i))
            i += 1
            continue
        heading, i = _heading_text(placed, i)
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
                bbox = _union([ln.bbox for ln in lines])
                text = merge_lines_text([ln.text for ln in lines])
                para = ParsedParagraph(text, p.page, bbox, lines=_text_lines(lines))
                out.append(Placed(PdfFloat(bbox, para), p.page, p.column, p.band))
                i = j
                continue
        out.append(p)
        i += 1
    return out


def _heading_text(placed: Sequence[Placed], i: int) -> tuple[str, int]:
    """The heading at `i` plus up to two wrapped continuation lines in the same style."""
    first: Line = placed[i].item  # type: ignore[assignment]
    parts = [first.text]
    j = i + 1
    while j < len(placed) and len(parts) < 3:
        nxt = placed[j]
        if not isinstance(nxt.item, Line) or (nxt.page, nxt.column, nxt.band) != (
            placed[i].page,
            placed[i].column,
            placed[i].band,
        ):
            break
        ln = nxt.item
        if ln.style != first.style or _NUMBERED.match(ln.text) or (first.text.isupper() and not ln.text.isupper()):
            break
        if not 0 < ln.baseline - first.baseline <= 1.5 * first.size * len(parts) or parts[-1].endswith("."):
            break
        parts.append(ln.text)
        j += 1
    return merge_lines_text(parts), j


def _slide_sections(pages: Sequence[_Page], placed: Sequence[Sequence[Placed]], body: float) -> list[ParsedSection]:
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
