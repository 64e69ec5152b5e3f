"""Whole PDF pages as images, for the `page_images` index option (ColPali-style retrieval).

A scanned or figure-heavy document has a poor text layer, so its pages are also indexed as
pictures: each page is rendered and becomes a paragraph with the `page` attachment in a
"Page images" section, with no text of its own, searched by its image vector alone (a
multimodal embedder, jina-embeddings-v4) and sent to a vision model by `img_k`.

Pages are rendered at the scale that fits jina-embeddings-v4's largest input image
(768 x 28 x 28 pixels; the server would downscale a larger one, so more pixels only cost
bytes), never above 200 dpi: an A4 page is ~80 dpi, ~600 x 850 pixels.
"""

from __future__ import annotations

import math
from pathlib import Path

import pymupdf

from kohaku_rag.document.tree import Attachment, ParsedParagraph, ParsedSection
from kohaku_rag.errors import DocumentError
from kohaku_rag.parse import limits

PAGE_SECTION = "Page images"
MAX_PIXELS = 768 * 28 * 28
MAX_ZOOM = 200 / 72  # 200 dpi


def page_zoom(width: float, height: float, max_pixels: int = MAX_PIXELS) -> float:
    """The render scale (1 = 72 dpi) that fits a page of `width` x `height` points."""
    if width <= 0 or height <= 0:
        return 1.0
    return min(math.sqrt(max_pixels / (width * height)), MAX_ZOOM)


def render_pages(path: Path, max_pixels: int = MAX_PIXELS) -> list[tuple[int, bytes]]:
    """(1-based page number, PNG) for every page of the PDF at `path`."""
    try:
        with pymupdf.open(path) as doc:
            if doc.page_count > limits.MAX_PAGES:
                raise DocumentError(path, f"{doc.page_count} pages, over the limit of {limits.MAX_PAGES}")
            out = []
            for page in doc:
                zoom = page_zoom(page.rect.width, page.rect.height, max_pixels)
                pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
                out.append((page.number + 1, pix.tobytes("png")))
            return out
    except (RuntimeError, ValueError) as exc:  # PyMuPDF's errors on a damaged file
        raise DocumentError(path, f"cannot render its pages ({type(exc).__name__}: {exc})") from exc


def page_section(path: Path) -> ParsedSection:
    """The "Page images" section: one text-less `page` paragraph per rendered page."""
    paragraphs = [
        ParsedParagraph(text="", page=number, attachment=Attachment.PAGE, image=png)
        for number, png in render_pages(path)
    ]
    return ParsedSection(title=PAGE_SECTION, paragraphs=paragraphs, page=1)
