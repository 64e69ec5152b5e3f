"""A PDF with two raster figures, written with PyMuPDF alone, whose figure images a test can
change one at a time (the image-vector tests: a changed figure re-embeds alone)."""

from __future__ import annotations

from pathlib import Path

import pymupdf

CAPTIONS = (
    "Figure 1: Quarterly totals of the first illustrative series.",
    "Figure 2: Monthly readings of the second illustrative series.",
)
TEXT = (
    "Overview of the measurement campaign",
    "The campaign recorded readings at three sites over one year. Each site reported its totals "
    "every quarter, and the readings were checked against the operator's own logs.",
    "The figures below summarise the two series without repeating their values in the text.",
)


def chart_png(shade: int, bars: int) -> bytes:
    """A small bar-chart-like PNG: `bars` dark bars on a background of grey `shade`."""
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 240, 140), False)
    pix.clear_with(shade)
    for k in range(bars):
        x0 = 20 + k * 40
        for x in range(x0, x0 + 24):
            for y in range(140 - 20 - 15 * (k + 1), 120):
                pix.set_pixel(x, y, (20, 40 + 30 * k % 200, 90))
    return pix.tobytes("png")


def write_figure_pdf(path: Path, images: tuple[bytes, bytes], uncaptioned: bytes | None = None) -> Path:
    """One page: a heading, two paragraphs, then each image with its caption below it, and
    `uncaptioned`, when given, as a third image with no caption on a second page."""
    doc = pymupdf.open()
    page = doc.new_page(width=595, height=842)
    page.insert_text((72, 80), TEXT[0], fontsize=16)
    y = 110.0
    for para in TEXT[1:]:
        rect = pymupdf.Rect(72, y, 523, y + 60)
        page.insert_textbox(rect, para, fontsize=10)
        y += 70
    for image, caption in zip(images, CAPTIONS, strict=True):
        page.insert_image(pymupdf.Rect(150, y, 390, y + 140), stream=image)
        page.insert_textbox(pymupdf.Rect(72, y + 148, 523, y + 180), caption, fontsize=9)
        y += 200
    if uncaptioned is not None:  # on a page of its own, far from any caption
        extra = doc.new_page(width=595, height=842)
        extra.insert_textbox(pymupdf.Rect(72, 72, 523, 120), "Appendix: a further chart.", fontsize=10)
        extra.insert_image(pymupdf.Rect(150, 300, 390, 440), stream=uncaptioned)
    doc.set_metadata(
        {"title": "Measurement campaign", "creationDate": "D:20250101000000Z", "modDate": "D:20250101000000Z"}
    )
    path.write_bytes(doc.tobytes(garbage=3, deflate=True))
    doc.close()
    return path
