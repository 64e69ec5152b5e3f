"""Figure extraction on real PDFs, OCR and vision captioning, and the caption cache."""

from __future__ import annotations

import io
import logging
import os
import re
from pathlib import Path

import numpy as np
import pymupdf
import pytest
from PIL import Image

from kohaku_rag.document.tree import media_hash
from kohaku_rag.errors import BackendError, DocumentError
from kohaku_rag.indexing.captions import (
    CaptionCache,
    Captioner,
    OcrCaptioner,
    VisionLLMCaptioner,
    cache_key,
    caption_cached,
    caption_many_cached,
)
from kohaku_rag.lake.layout import Lake
from kohaku_rag.parse.pdf_figures import FigureCandidate, find_figures, store_figure
from tests.support.shared_data import PDFS
from tests.support.vision_server import Reply, VisionServer, describe

RESNET = PDFS / "he2015_resnet_1512.03385.pdf"
VASWANI = PDFS / "vaswani2017_attention_1706.03762.pdf"
SLIDES = PDFS / "wattbot2025_attentionplease_slides.pdf"
CORRUPT = b"\x89PNG\r\n\x1a\n" + b"this is not really a png"


def _all_figures(path: Path) -> list[FigureCandidate]:
    with pymupdf.open(path) as doc:
        return [fig for page in doc for fig in find_figures(page)]


@pytest.fixture(scope="module")
def resnet() -> list[FigureCandidate]:
    return _all_figures(RESNET)


@pytest.fixture(scope="module")
def vaswani() -> list[FigureCandidate]:
    return _all_figures(VASWANI)


@pytest.fixture(scope="module")
def slides() -> list[FigureCandidate]:
    return _all_figures(SLIDES)


@pytest.fixture(scope="module")
def ocr() -> OcrCaptioner:
    return OcrCaptioner(threads=1)  # the test machine is shared; one thread each is fastest


def _figure_number(fig: FigureCandidate) -> int:
    match = re.match(r"Figure (\d+)[.:]", fig.caption)
    assert match, f"page {fig.page}: caption {fig.caption[:60]!r} does not start with 'Figure N'"
    return int(match.group(1))


def _png_size(data: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(data)) as img:
        assert img.format == "PNG"
        return img.size


# --- extraction on the shared PDFs ---------------------------------------------------------


def test_resnet_vector_plots_each_with_its_caption(resnet: list[FigureCandidate]) -> None:
    # The paper has no raster image: every plot and diagram is vector line art.
    assert [f.source for f in resnet] == ["vector"] * 7
    assert [(f.page, _figure_number(f)) for f in resnet] == [(1, 1), (2, 2), (4, 3), (5, 4), (6, 5), (8, 6), (8, 7)]
    fig1 = resnet[0]
    assert fig1.caption.startswith(
        "Figure 1. Training error (left) and test error (right) on CIFAR-10 with 20-layer and 56-layer"
    )
    assert fig1.caption.endswith("Similar phenomena on ImageNet is presented in Fig. 4.")
    # Both panels and their axis labels: the right column, from the plots to above the caption.
    x0, y0, x1, y1 = fig1.bbox
    assert 300 < x0 < 312 and 540 < x1 < 550 and 215 < y0 < 226 and 300 < y1 < 306
    # Hyphenation across lines is undone in captions ("Mid-\ndle" → "Middle", "CIFAR-\n10" kept).
    assert "Middle: a plain network" in resnet[2].caption
    assert "on CIFAR-10. The responses" in resnet[6].caption


def test_tables_and_rules_are_not_figures(resnet: list[FigureCandidate], vaswani: list[FigureCandidate]) -> None:
    # ResNet pages 5-7 and 11-12 and Transformer page 9 are full of ruled tables.
    assert {f.page for f in resnet} & {7, 11, 12} == set()
    assert [f.page for f in resnet if f.page in (5, 6)] == [5, 6]  # only Figures 4 and 5 there
    assert 9 not in {f.page for f in vaswani}


def test_rendered_png_matches_bbox_at_requested_dpi(resnet: list[FigureCandidate]) -> None:
    for fig in resnet:
        w, h = _png_size(fig.image)
        x0, y0, x1, y1 = fig.bbox
        assert abs(w - (x1 - x0) * 150 / 72) <= 2 and abs(h - (y1 - y0) * 150 / 72) <= 2
        assert fig.digest == media_hash(fig.image)
    with pymupdf.open(RESNET) as doc:
        sharp = find_figures(doc[0], dpi=300)
    assert _png_size(sharp[0].image)[0] == pytest.approx(2 * _png_size(resnet[0].image)[0], abs=2)


def test_vaswani_raster_figures_and_attention_maps(vaswani: list[FigureCandidate]) -> None:
    assert [(f.page, f.source, _figure_number(f)) for f in vaswani] == [
        (3, "raster", 1),
        (4, "raster", 2),
        (13, "vector", 3),
        (14, "vector", 4),
        (15, "vector", 5),
    ]
    assert vaswani[0].caption == "Figure 1: The Transformer - model architecture."
    # Figure 2's two images share one caption, so they are one figure spanning both panels
    # and the panel titles printed as PDF text above them.
    x0, _, x1, _ = vaswani[1].bbox
    assert x0 < 160 and x1 > 460


def test_slides_diagrams_charts_and_screenshot(slides: list[FigureCandidate]) -> None:
    assert [(f.page, f.source) for f in slides] == [
        (4, "raster"),  # RAG overview picture
        (10, "vector"),  # TikZ pipeline diagram
        (13, "vector"),  # baseline flow chart
        (17, "vector"),  # bar chart
        (19, "vector"),  # HERO pipeline
        (24, "vector"),  # grouped bar chart
        (26, "raster"),  # leaderboard screenshot inside a text block
    ]
    # Slides carry no "Figure N" captions; header and footer bars, bullets, text blocks and
    # the ruled tables on slides 15, 16 and 27 are not figures.
    assert all(f.caption == "" for f in slides)
    page_height = 272.126
    for fig in slides:
        assert fig.bbox[1] > 24 and fig.bbox[3] < page_height - 8, "header/footer bar taken in"


# --- synthetic pages: masks, duplicates, captions above, explicit tables -------------------


def _rgba_png(size: int = 120) -> bytes:
    """Opaque red square in the top-left quarter, fully transparent elsewhere."""
    pixels = np.zeros((size, size, 4), dtype=np.uint8)
    pixels[: size // 2, : size // 2] = (255, 0, 0, 255)
    buf = io.BytesIO()
    Image.fromarray(pixels, "RGBA").save(buf, format="PNG")
    return buf.getvalue()


def test_soft_mask_is_applied_and_repeated_image_counted_once() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    png = _rgba_png()
    page.insert_image(pymupdf.Rect(100, 100, 220, 220), stream=png)
    page.insert_image(pymupdf.Rect(300, 400, 420, 520), stream=png)  # the same picture again
    page.insert_text((100, 240), "Figure 3: A red square on a transparent background.", fontsize=9)
    [fig] = find_figures(page, dpi=72)
    assert fig.source == "raster" and fig.caption == "Figure 3: A red square on a transparent background."
    with Image.open(io.BytesIO(fig.image)) as img:
        rgb = img.convert("RGB")
        w, h = rgb.size
        assert rgb.getpixel((w // 4, h // 4)) == (255, 0, 0)
        # The transparent part shows the white page, not the black of unmasked pixels.
        assert rgb.getpixel((3 * w // 4, 3 * h // 4)) == (255, 255, 255)


def test_full_page_background_image_is_not_a_figure() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.insert_image(page.rect, stream=_rgba_png(), keep_proportion=False)
    page.insert_text((72, 100), "Text printed over a page-sized background picture.", fontsize=11)
    assert find_figures(page) == []


def _plot_page(caption_above: bool) -> pymupdf.Page:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    shape = page.new_shape()
    shape.draw_rect(pymupdf.Rect(150, 300, 450, 480))
    shape.draw_polyline([(150, 470), (200, 400), (260, 420), (330, 340), (450, 310)])
    shape.finish(color=(0, 0, 1), width=1)
    shape.commit()
    page.insert_text((280, 495), "epochs", fontsize=8)
    page.insert_text((380, 505), "(a)", fontsize=7)  # a stray label between figure and caption
    y = 270 if caption_above else 520
    page.insert_text((150, y), "Fig. 7. Validation loss against epochs.", fontsize=9)
    page.insert_text((150, 620), "Body text that follows the figure and is not part of it.", fontsize=10)
    return page


def test_caption_below_or_above_and_axis_label_included() -> None:
    for above in (False, True):
        [fig] = find_figures(_plot_page(above), dpi=72)
        assert fig.source == "vector" and fig.caption == "Fig. 7. Validation loss against epochs."
        assert fig.bbox[3] >= 495  # the x-axis title below the frame is part of the picture
        assert fig.bbox[3] < 515  # ...but the caption and body text are not


def test_table_boxes_given_by_caller_are_not_figures() -> None:
    page = _plot_page(False)
    assert find_figures(page, tables=[(140, 290, 460, 500)]) == []
    # Ruled rows of text alone (a booktabs table) never form a figure.
    doc = pymupdf.open()
    ruled = doc.new_page(width=612, height=792)
    for k, y in enumerate((100, 118, 136, 154, 172)):
        ruled.draw_line((100, y), (500, y), width=0.5)
        ruled.insert_text((110, y + 13), f"row {k}   0.{k}1   0.{k}2   0.{k}3", fontsize=9)
    ruled.draw_line((100, 95), (100, 177), width=0.5)
    ruled.draw_line((500, 95), (500, 177), width=0.5)
    assert find_figures(ruled) == []


def test_tables_from_a_layout_analysis_already_run_are_used() -> None:
    with pymupdf.open(RESNET) as doc:
        page = doc[4]  # Table 1, Figure 4 and Table 2
        found = page.find_tables()  # runs PyMuPDF's layout model and keeps its boxes on the page
        assert len(found.tables) == 2 and page.layout_information
        [fig] = find_figures(page)
    assert fig.caption.startswith("Figure 4. Training on ImageNet.")
    assert all(not pymupdf.Rect(fig.bbox).intersects(t.bbox) for t in found.tables)


def test_short_caption_right_under_a_figure_is_linked_not_swallowed() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.draw_polyline([(150, 400), (250, 320), (350, 380), (450, 300)], color=(1, 0, 0))
    page.draw_rect(pymupdf.Rect(150, 290, 450, 400), color=(0, 0, 0))
    page.insert_text((150, 410), "Fig. 2: Loss.", fontsize=8)  # 3 pt under the frame
    [fig] = find_figures(page)
    assert fig.caption == "Fig. 2: Loss." and fig.bbox[3] <= 402.5


def test_store_figure_writes_once_by_content_hash(tmp_path: Path, resnet: list[FigureCandidate]) -> None:
    lake = Lake(tmp_path)
    fig = resnet[1]
    path = store_figure(lake, fig)
    assert path == lake.blob(fig.digest) and path.read_bytes() == fig.image
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))  # a rewrite would move it to now
    assert store_figure(lake, fig) == path and path.stat().st_mtime_ns == 1_000_000_000
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left over


# --- OCR captioning and the cache ----------------------------------------------------------


def test_ocr_reads_axis_labels_of_a_resnet_plot(ocr: OcrCaptioner, resnet: list[FigureCandidate]) -> None:
    fig1 = resnet[0]
    text = ocr.caption(fig1.image, fig1.caption)
    assert text.startswith(fig1.caption + " Text in figure: ")
    read = text[len(fig1.caption) :].lower()
    assert "iter" in read and "error" in read and "56-layer" in read


class CountingCaptioner:
    """Wraps a real captioner and counts the images it is asked to caption."""

    def __init__(self, inner: Captioner) -> None:
        self.inner = inner
        self.captioner_id = inner.captioner_id
        self.calls = 0

    def caption(self, image_png: bytes, pdf_caption: str) -> str:
        self.calls += 1
        return self.inner.caption(image_png, pdf_caption)

    def caption_many(self, items):  # type: ignore[no-untyped-def]
        self.calls += len(items)
        return self.inner.caption_many(items)


def test_cache_hit_on_second_run_and_corrupt_image_fails_alone(
    tmp_path: Path, ocr: OcrCaptioner, resnet: list[FigureCandidate]
) -> None:
    fig2 = resnet[1]  # the small residual-block diagram: "weight layer", "relu", "identity"
    counting = CountingCaptioner(ocr)
    cache = CaptionCache(tmp_path / "captions")
    items = [(CORRUPT, "Figure 9: broken"), (fig2.image, fig2.caption)]

    first = caption_many_cached(counting, cache, items)
    assert isinstance(first[0], DocumentError)
    assert media_hash(CORRUPT) in str(first[0]) and "not a decodable image" in str(first[0])
    text, hit = first[1]  # type: ignore[misc]
    assert not hit and text.startswith("Figure 2. Residual learning: a building block. Text in figure:")
    assert "weight layer" in text and "identity" in text
    assert counting.calls == 2

    again = caption_many_cached(counting, cache, items[1:])
    assert again == [(text, True)] and counting.calls == 2  # not captioned again
    assert caption_cached(counting, cache, fig2.image, fig2.caption) == (text, True)
    assert counting.calls == 2
    # A different PDF caption or captioner is a different entry.
    assert cache.get(cache_key(fig2.digest, ocr.captioner_id, "other")) is None
    assert cache.get(cache_key(fig2.digest, "vision:x:y", fig2.caption)) is None


def test_damaged_cache_entry_is_a_miss(tmp_path: Path) -> None:
    cache = CaptionCache(tmp_path)
    key = cache_key("ab" * 32, "ocr:x", "")
    cache.put(key, "hello")
    assert cache.get(key) == "hello"
    cache.path(key).write_text("{not json")
    assert cache.get(key) is None
    with pytest.raises(ValueError, match="not a caption cache key"):
        cache.get("../escape")


# --- vision captioner against a real HTTP server -------------------------------------------


def test_vision_captioner_retries_429_and_500_and_sends_base64_png(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, resnet: list[FigureCandidate]
) -> None:
    secret = "sk-test-3f9a-never-log-me"
    monkeypatch.setenv("KOHAKU_TEST_VISION_KEY", secret)
    fig = resnet[0]
    caplog.set_level(logging.DEBUG)
    with VisionServer() as srv:
        srv.script(Reply(429, (("Retry-After", "1"),)), Reply(500))
        captioner = VisionLLMCaptioner(srv.base_url, "test-vl", api_key_env="KOHAKU_TEST_VISION_KEY", backoff_base=0.05)
        text = captioner.caption(fig.image, fig.caption)
        captioner.close()
    assert text == f"{fig.caption} Figure content: {describe(fig.image)}"
    assert [r.status for r in srv.requests] == [429, 500, 200]
    assert srv.requests[1].at - srv.requests[0].at >= 0.95  # Retry-After: 1 honoured
    for seen in srv.requests:
        assert seen.image == fig.image  # sent as data:image/png;base64,...
        assert seen.headers["authorization"] == f"Bearer {secret}"
        assert seen.body["model"] == "test-vl"
        prompt = seen.body["messages"][0]["content"][0]["text"]
        assert "axis labels" in prompt and "2-3 sentences" in prompt
    assert "retry 1/4" in caplog.text and secret not in caplog.text
    assert secret not in repr(captioner)


def test_vision_caption_many_bounded_and_corrupt_item_alone(
    monkeypatch: pytest.MonkeyPatch, resnet: list[FigureCandidate]
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    items = [(f.image, f.caption) for f in resnet[:4]]
    items.insert(2, (CORRUPT, "Figure 99."))
    with VisionServer(default_delay=0.2) as srv:
        captioner = VisionLLMCaptioner(srv.base_url, "test-vl", api_key_env=None, max_concurrent=2)
        results = captioner.caption_many(items)
        captioner.close()
    assert isinstance(results[2], DocumentError) and media_hash(CORRUPT) in str(results[2])
    for (image, caption), result in zip(items[:2] + items[3:], results[:2] + results[3:]):
        assert result == f"{caption} Figure content: {describe(image)}"
    assert len(srv.requests) == 4  # the corrupt image never reached the server
    assert srv.max_in_flight == 2
    assert all("authorization" not in r.headers for r in srv.requests)


def test_vision_captioner_gives_up_with_clear_errors(
    monkeypatch: pytest.MonkeyPatch, resnet: list[FigureCandidate]
) -> None:
    fig = resnet[1]
    with VisionServer() as srv:
        srv.script(Reply(503), Reply(503), Reply(400))
        captioner = VisionLLMCaptioner(srv.base_url, "test-vl", api_key_env=None, max_retries=1, backoff_base=0.01)
        with pytest.raises(BackendError, match=rf"figure {fig.digest}: .*failed after 2 attempts.*HTTP 503"):
            captioner.describe(fig.image)
        with pytest.raises(BackendError, match="HTTP 400"):  # a client error is not retried
            captioner.describe(fig.image)
        captioner.close()
    assert [r.status for r in srv.requests] == [503, 503, 400]
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(BackendError, match="OPENAI_API_KEY is not set"):
        VisionLLMCaptioner("http://127.0.0.1:9", "m")
