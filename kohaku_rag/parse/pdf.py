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

This module opens and checks the file and takes the floats out of each page; the title
and heading rules are in `pdf_headings.py`, paragraphs and sections in `pdf_paragraphs.py`.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import pymupdf

from kohaku_rag.document.tree import Attachment, BBox, ParsedDocument, ParsedParagraph, TextLine
from kohaku_rag.errors import DocumentError
from kohaku_rag.parse import limits
from kohaku_rag.parse.pdf_figures import FigureCandidate, find_figures
from kohaku_rag.parse.pdf_headings import document_title, is_references, place_outline, text_style, title_lines
from kohaku_rag.parse.pdf_layout import (
    Line,
    Placed,
    body_size,
    find_gutter,
    margin_lines,
    merge_lines_text,
    page_lines,
    reading_order,
    vocabulary_of,
)
from kohaku_rag.parse.pdf_page_items import PdfFloat, PdfPage, union_bbox
from kohaku_rag.parse.pdf_paragraphs import paper_sections, slide_sections
from kohaku_rag.parse.pdf_tables import find_page_tables, page_words, table_record

# is_references is part of this module's API (the indexing steps import it from here).
__all__ = ["is_references", "parse_pdf"]

MIN_TEXT_CHARS = 20  # below this a PDF has no usable text layer
SLIDE_ASPECTS = (4 / 3, 16 / 9, 16 / 10)
SLIDE_MAX_CHARS = 1200  # median characters per page; papers have 3,000+

_CAPTION = re.compile(r"^(table|tab\.|figure|fig\.)\s*(\d+|[A-Z]\.?\d*)\s*[.:|]?", re.IGNORECASE)
_NORM = re.compile(r"[^a-z0-9]+")


def parse_pdf(
    path: Path, doc_id: str, *, title: str | None = None, use_outline: bool = True, tables: bool = True
) -> ParsedDocument:
    """Parse one PDF into sections and paragraphs (sentences are split later by
    `build_tree`). Unreadable, encrypted, empty and image-only PDFs raise DocumentError."""
    path = Path(path)
    doc = _open(path)
    try:
        mu_pages = _pages(doc, path)
        pages = [PdfPage(p.number + 1, p.rect.width, p.rect.height, _lines(p, path)) for p in mu_pages]
        _check_text(doc, pages, path)
        slides = _is_slide_deck(pages)
        body = body_size(ln for pg in pages for ln in pg.lines)
        drop = margin_lines([pg.lines for pg in pages], [pg.height for pg in pages], body, slides=slides)
        for pg in pages:
            pg.lines = [ln for ln in pg.lines if ln not in drop]
            _attach_floats(mu_pages[pg.number - 1], pg, path, tables)
            if not slides:
                pg.lines = [ln for ln in pg.lines if not _is_label(ln, body)]
        doc_title, title_source = document_title(title, doc.metadata or {}, pages)
        placed = [_placed(pg) for pg in pages]
        vocabulary = vocabulary_of(ln for pg in pages for ln in pg.lines)
        source = "slides"
        if slides:
            sections = slide_sections(pages, placed, body)
        else:
            style = text_style(pages, body, title_lines(pages))
            outline = place_outline(doc.get_toc(simple=True), pages, style) if use_outline else None
            flat = [p for pp in placed for p in pp]
            sections = paper_sections(flat, pages, style, doc_title, outline, vocabulary)
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


def _check_text(doc: pymupdf.Document, pages: Sequence[PdfPage], path: Path) -> None:
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


def _is_slide_deck(pages: Sequence[PdfPage]) -> bool:
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


def _attach_floats(page: pymupdf.Page, pg: PdfPage, path: Path, records: bool = True) -> None:
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
        caption_lines: list[TextLine] = []
        if caption_block is not None:
            used.add(caption_block)
            cap_lines = blocks[caption_block]
            consumed.update(cap_lines)
            caption = merge_lines_text([ln.text for ln in cap_lines])
            caption_lines = [TextLine(pg.number, ln.bbox, ln.text) for ln in sorted(cap_lines, key=lambda c: c.y0)]
            bbox = union_bbox([bbox, *(ln.bbox for ln in cap_lines)])
        text = f"{caption}\n{tab.text()}" if caption else tab.text()
        # the caption's lines and each row as the paragraph's lines: a citation of the table
        # highlights its caption and the row that states the value (serving/documents.py)
        rows = [TextLine(pg.number, box, " | ".join(row)) for row, box in zip(tab.rows, tab.row_boxes, strict=True)]
        record = table_record(tab, caption, pg.number) if records else None
        table = ParsedParagraph(
            text, pg.number, tab.bbox, Attachment.TABLE, lines=(*caption_lines, *rows), table=record
        )
        pg.floats.append(PdfFloat(bbox, table))
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
                bbox = union_bbox([bbox, *(ln.bbox for ln in cap_lines)])
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
        cb = union_bbox([ln.bbox for ln in lines])
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


def _placed(pg: PdfPage) -> list[Placed]:
    gutter = find_gutter(pg.lines, pg.width)
    return reading_order(pg.number, pg.lines, [(f.bbox, f) for f in pg.floats], gutter)
