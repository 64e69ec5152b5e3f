"""Figures on a PDF page: embedded raster images and vector plots, with their captions.

Many papers draw their plots as vector paths (the ResNet paper has no raster image at all),
so a figure is found in two ways: the bounding boxes of embedded images, and clusters of
nearby drawings that hold at least one real graphic stroke (a curve, a slanted line, a bar,
an arrow head). Clusters made only of axis-parallel rules are table grids, and clusters whose
shapes all hold text are text panels (slide blocks, table shading); neither is a figure.

Each region grows by the short text lines around it (tick and axis labels), is linked to the
"Figure N." paragraph just below (or above) it, and is rendered with `Page.get_pixmap(clip=)`,
which applies soft masks, rotations and any vector overlay exactly as a reader sees them.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pymupdf

from kohaku_rag.document.tree import BBox, media_hash
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import write_bytes_atomic
from kohaku_rag.parse import limits

FigureSource = Literal["raster", "vector"]

CAPTION_START = re.compile(r"^\s*(?:Figure|Fig\.)\s*(?:[A-Z]\.?)?\d+[a-z]?\s*[:.]", re.IGNORECASE)

# Text extraction without ligatures ("ﬁ" → "fi"), so captions are searchable as typed.
_TEXT_FLAGS = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_LIGATURES & ~pymupdf.TEXT_PRESERVE_IMAGES

_CLUSTER_TOLERANCE = 4.0  # points between drawings of one graphic
_LABEL_PAD = 8.0  # how far outside a graphic its tick/axis labels may sit
_CAPTION_GAP = 40.0  # largest vertical gap between a figure and its caption
_RENDER_PAD = 2.0  # keep anti-aliased edges and stroke widths inside the picture
log = logging.getLogger(__name__)
_MAX_ASPECT = 12.0  # longer:shorter side beyond which a region is a rule or a bar
_MIN_THICKNESS = 12.0  # thinner regions are lines, rules or footer strips
_TOUCH = (-2.0, -2.0, 2.0, 2.0)  # regions this close are parts of one figure


@dataclass(frozen=True)
class FigureCandidate:
    page: int  # 1-based
    bbox: BBox
    image: bytes  # PNG
    caption: str  # the PDF's own "Figure N. ..." paragraph, "" if none
    source: FigureSource

    @property
    def digest(self) -> str:
        return media_hash(self.image)


@dataclass(frozen=True)
class _Line:
    rect: pymupdf.Rect
    in_caption: bool  # part of a "Figure N." paragraph: never a label of the figure


@dataclass(frozen=True)
class _Block:
    rect: pymupdf.Rect
    text: str
    index: int


@dataclass  # mutable on purpose: regions grow and get linked while a page is assembled
class _Region:
    rect: pymupdf.Rect
    source: FigureSource
    caption_block: int | None = None


def find_figures(
    page: pymupdf.Page,
    *,
    min_side: float = 60.0,
    dpi: int = 150,
    tables: Sequence[BBox] | None = None,
) -> list[FigureCandidate]:
    """The figures on `page`, top to bottom, each rendered to PNG with its caption.

    `tables` are table boxes the caller already found (e.g. with `page.find_tables()`); a
    region that coincides with one is a table, not a figure. When None, the table boxes of a
    layout analysis already run on this page object are used, if any: running one here would
    cost about a second per page, and the rule-only test below catches ruled tables anyway.
    """
    text = page.get_text("dict", flags=_TEXT_FLAGS)
    blocks, lines = _text_blocks(text)
    table_rects = [pymupdf.Rect(t) for t in (tables if tables is not None else _layout_tables(page))]

    regions = _raster_regions(page, min_side) + _vector_regions(page, lines, min_side)
    regions = [r for r in regions if not _coincides_with_table(r.rect, table_rects)]
    regions = _settle(regions, lines)
    _link_captions(regions, blocks)
    # Panels joined by their shared caption may now reach labels that lay between them.
    regions = _settle(_merge_same_caption(regions), lines)

    captions = {b.index: b.text for b in blocks}
    figures: list[FigureCandidate] = []
    seen: set[str] = set()
    for region in sorted(regions, key=lambda r: (r.rect.y0, r.rect.x0)):
        clip = _render_clip(region.rect, lines, page.rect)
        pixels = round(clip.width * dpi / 72) * round(clip.height * dpi / 72)
        if pixels > limits.MAX_FIGURE_PIXELS:
            # Rendering it would take gigabytes (a tiny file can declare a huge page); the
            # rest of the page and the document still index.
            log.warning(
                "%s: page %d: figure region of %d megapixels skipped (over the %d-megapixel limit)",
                page.parent.name,
                page.number + 1,
                pixels // 1_000_000,
                limits.MAX_FIGURE_PIXELS // 1_000_000,
            )
            continue
        png = page.get_pixmap(clip=clip, dpi=dpi).tobytes("png")
        fig = FigureCandidate(
            page=page.number + 1,
            bbox=(round(clip.x0, 2), round(clip.y0, 2), round(clip.x1, 2), round(clip.y1, 2)),
            image=png,
            caption=captions.get(region.caption_block, "") if region.caption_block is not None else "",
            source=region.source,
        )
        # The same picture placed twice on a page (a repeated logo, a duplicated panel) is
        # stored and captioned once.
        if fig.digest in seen:
            continue
        seen.add(fig.digest)
        figures.append(fig)
    return figures


def store_figure(lake: Lake, fig: FigureCandidate) -> Path:
    """Write the figure's PNG under its content hash, once; return its path."""
    path = lake.blob(fig.digest)
    if not path.exists():
        write_bytes_atomic(path, fig.image)
    return path


# --- text ---------------------------------------------------------------------------------


def _clean(text: str) -> str:
    text = unicodedata.normalize("NFC", text)
    # A word broken at a line end ("Mid-" + "dle") is joined; "CIFAR-" + "10" keeps its dash.
    text = re.sub(r"(?<=[a-z])-\n(?=[a-z])", "", text)
    text = re.sub(r"-\n(?=\S)", "-", text)
    return re.sub(r"\s+", " ", text).strip()


def _text_blocks(text: dict[str, Any]) -> tuple[list[_Block], list[_Line]]:
    blocks: list[_Block] = []
    lines: list[_Line] = []
    for index, block in enumerate(b for b in text["blocks"] if b["type"] == 0):
        parts = [(line, "".join(span["text"] for span in line["spans"])) for line in block["lines"]]
        parts = [(line, t) for line, t in parts if t.strip()]
        if not parts:
            continue
        cleaned = _clean("\n".join(t for _, t in parts))
        is_caption = bool(CAPTION_START.match(cleaned))
        lines.extend(_Line(pymupdf.Rect(line["bbox"]), is_caption) for line, _ in parts)
        blocks.append(_Block(pymupdf.Rect(block["bbox"]), cleaned, index))
    return blocks, lines


def _layout_tables(page: pymupdf.Page) -> list[BBox]:
    """Table boxes of a layout analysis someone already ran on this page, else none."""
    info = getattr(page, "layout_information", None) or []
    boxes: list[BBox] = []
    for item in info:
        if isinstance(item, (list, tuple)) and len(item) >= 5 and item[4] == "table":
            boxes.append((float(item[0]), float(item[1]), float(item[2]), float(item[3])))
    return boxes


# --- geometry -----------------------------------------------------------------------------


def _area(r: pymupdf.Rect) -> float:
    return max(r.x1 - r.x0, 0.0) * max(r.y1 - r.y0, 0.0)


def _overlap(a: pymupdf.Rect, b: pymupdf.Rect) -> float:
    return _area(pymupdf.Rect(a) & b) if a.intersects(b) else 0.0


def _is_figure_sized(r: pymupdf.Rect, page: pymupdf.Page, min_side: float) -> bool:
    w, h = r.width, r.height
    if max(w, h) < min_side or min(w, h) < _MIN_THICKNESS:
        return False  # logos, bullets, rules and footer strips
    if max(w, h) / max(min(w, h), 1e-6) > _MAX_ASPECT:
        return False
    # A picture under the whole page is a background, not a figure.
    return _area(r) < 0.8 * _area(page.rect)


def _coincides_with_table(r: pymupdf.Rect, tables: Sequence[pymupdf.Rect]) -> bool:
    return any(_overlap(r, t) >= 0.6 * min(_area(r), _area(t)) for t in tables if _area(t) > 0)


# --- raster -------------------------------------------------------------------------------


def _raster_regions(page: pymupdf.Page, min_side: float) -> list[_Region]:
    regions: list[_Region] = []
    seen: set[bytes] = set()
    for info in page.get_image_info(hashes=True, xrefs=True):
        rect = pymupdf.Rect(info["bbox"]) & page.rect
        # The same picture placed again on the page (a repeated logo or panel) counts once.
        if info["digest"] in seen or not _is_figure_sized(rect, page, min_side):
            continue
        seen.add(info["digest"])
        regions.append(_Region(rect, "raster"))
    return regions


# --- vector -------------------------------------------------------------------------------


def _is_white(color: Sequence[float] | None) -> bool:
    return color is not None and all(c > 0.97 for c in color)


def _visible(path: dict[str, Any]) -> bool:
    """A white fill or white stroke on a white page draws nothing worth clustering."""
    kind = path.get("type", "")
    filled = "f" in kind and not _is_white(path.get("fill"))
    stroked = "s" in kind and not _is_white(path.get("color"))
    return filled or stroked


def _is_graphic(path: dict[str, Any], lines: Sequence[_Line]) -> bool:
    """A stroke or shape that only a figure draws: not a rule, not a box around text."""
    rect = path["rect"]
    if max(rect.width, rect.height) < 3.0:
        return False  # a dot, a tick mark, a glyph-sized speck
    if _is_container(path) and any(rect.contains((line.rect.tl + line.rect.br) * 0.5) for line in lines):
        return False  # a box around text: a diagram node, a slide block, table shading
    for item in path["items"]:
        op = item[0]
        if op == "c":
            return True  # curves: plot lines, arrows, circles
        if op == "l":
            p, q = item[1], item[2]
            if abs(p.x - q.x) > 0.5 and abs(p.y - q.y) > 0.5:
                return True  # a slanted segment: polylines of a plot, arrow heads
    # A filled shape with body (a bar, a marker, a heat-map cell) rather than a thin rule.
    return "f" in path.get("type", "") and min(rect.width, rect.height) >= 2.0


def _visible_paths(page: pymupdf.Page) -> list[dict[str, Any]]:
    """Drawn paths with `rect` cut to what their clip paths let show.

    Plotting tools often draw whole shapes and clip them (the attention maps in the
    Transformer paper draw colour patches far outside their visible window); the unclipped
    rectangles would swallow the caption and the page around the figure.
    """
    page_rect = page.rect
    scissors: list[tuple[int, pymupdf.Rect]] = []
    paths: list[dict[str, Any]] = []
    for item in page.get_drawings(extended=True):
        level = item.get("level", 0)
        while scissors and scissors[-1][0] >= level:
            scissors.pop()
        kind = item["type"]
        if kind == "clip":
            scissors.append((level, pymupdf.Rect(item["scissor"])))
            continue
        if kind == "group":
            continue
        window = scissors[-1][1] if scissors else page_rect
        r = pymupdf.Rect(item["rect"])
        x0, y0 = max(r.x0, window.x0, page_rect.x0), max(r.y0, window.y0, page_rect.y0)
        x1, y1 = min(r.x1, window.x1, page_rect.x1), min(r.y1, window.y1, page_rect.y1)
        if x1 < x0 or y1 < y0:
            continue  # clipped away entirely
        # Page backgrounds, slide header and footer bars and page frames span the page.
        if x1 - x0 >= 0.95 * page_rect.width or y1 - y0 >= 0.95 * page_rect.height:
            continue
        if _visible(item):
            paths.append({**item, "rect": pymupdf.Rect(x0, y0, x1, y1)})
    return paths


def _is_container(path: dict[str, Any]) -> bool:
    """A closed or filled shape can frame text; an open polyline (a plot curve) cannot."""
    return (
        "f" in path.get("type", "")
        or bool(path.get("closePath"))
        or all(item[0] in ("re", "qu") for item in path["items"])
    )


def _vector_regions(page: pymupdf.Page, lines: Sequence[_Line], min_side: float) -> list[_Region]:
    """Clusters of nearby drawings that hold a real graphic, each grown by the drawings
    clustered right next to it (a diagram's text-only boxes, a legend frame)."""
    paths = _visible_paths(page)
    if not paths:
        return []
    clusters = page.cluster_drawings(
        drawings=paths, x_tolerance=_CLUSTER_TOLERANCE, y_tolerance=_CLUSTER_TOLERANCE, final_filter=False
    )
    seeds: list[pymupdf.Rect] = []
    others: list[pymupdf.Rect] = []
    for cluster in clusters:
        grown = cluster + (-0.5, -0.5, 0.5, 0.5)
        members = [p for p in paths if grown.contains(p["rect"])]
        if _is_figure_sized(cluster, page, min_side) and any(_is_graphic(p, lines) for p in members):
            seeds.append(pymupdf.Rect(cluster))
        else:
            others.append(pymupdf.Rect(cluster))
    regions = [_Region(seed, "vector") for seed in seeds]
    for region in regions:
        changed = True
        while changed:
            changed = False
            near = region.rect + (-_LABEL_PAD - 4, -_LABEL_PAD - 4, _LABEL_PAD + 4, _LABEL_PAD + 4)
            for other in others:
                # Rules and boxes that are not graphic alone may still belong to a figure,
                # but only small ones: a whole table standing next to a figure stays out.
                small = _area(other) < 0.25 * _area(region.rect)
                if small and near.intersects(other) and not region.rect.contains(other):
                    region.rect |= other
                    changed = True
    return regions


# --- assembling regions -------------------------------------------------------------------


def _merge_overlapping(regions: list[_Region]) -> list[_Region]:
    """Union regions that overlap; a region holding a raster image stays "raster"."""
    merged = list(regions)
    changed = True
    while changed:
        changed = False
        for i in range(len(merged)):
            for j in range(i + 1, len(merged)):
                a, b = merged[i], merged[j]
                if (a.rect + _TOUCH).intersects(b.rect):
                    source: FigureSource = "raster" if "raster" in (a.source, b.source) else "vector"
                    caption = a.caption_block if a.caption_block is not None else b.caption_block
                    merged[i] = _Region(a.rect | b.rect, source, caption)
                    del merged[j]
                    changed = True
                    break
            if changed:
                break
    return merged


def _settle(regions: list[_Region], lines: Sequence[_Line]) -> list[_Region]:
    regions = _merge_overlapping(regions)
    _grow_by_labels(regions, lines)
    return _merge_overlapping(regions)


def _grow_by_labels(regions: list[_Region], lines: Sequence[_Line]) -> None:
    """Take in the short text lines in and around each region (tick labels, axis titles,
    legends, panel titles).

    Long lines are body text and stay out unless they lie inside the region; caption lines
    always stay out.
    Growing repeats so an axis title beside its tick labels joins too.
    """
    taken: set[int] = set()
    for region in regions:
        for _ in range(4):
            before = pymupdf.Rect(region.rect)
            near = region.rect + (-_LABEL_PAD, -_LABEL_PAD, _LABEL_PAD, _LABEL_PAD)
            for k, line in enumerate(lines):
                if k in taken or line.in_caption or not near.intersects(line.rect):
                    continue
                inside = _overlap(line.rect, region.rect) >= 0.8 * _area(line.rect)
                short = max(line.rect.width, line.rect.height) <= 0.5 * max(before.width, before.height)
                if inside or short:
                    taken.add(k)
                    region.rect |= line.rect
            if region.rect == before:
                break


def _link_captions(regions: list[_Region], blocks: Sequence[_Block]) -> None:
    """Link each region to the first text block below it (or, failing that, above it) when
    that block starts with "Figure N." / "Fig. N:"; other figure regions in between are
    stepped over, so stacked panels share the caption under the lowest one."""
    free = [b for b in blocks if not any(_overlap(b.rect, r.rect) >= 0.8 * _area(b.rect) for r in regions)]
    for region in regions:
        below = _first_block(region, regions, free, downwards=True)
        if below is not None and CAPTION_START.match(below.text):
            region.caption_block = below.index
            continue
        above = _first_block(region, regions, free, downwards=False)
        if above is not None and CAPTION_START.match(above.text):
            region.caption_block = above.index


def _h_overlaps(a: pymupdf.Rect, b: pymupdf.Rect) -> bool:
    shared = min(a.x1, b.x1) - max(a.x0, b.x0)
    return shared >= 0.3 * min(a.width, b.width)


def _first_block(
    region: _Region, regions: Sequence[_Region], blocks: Sequence[_Block], *, downwards: bool
) -> _Block | None:
    """The nearest text block below (above) the region that is not a stray label.

    Narrow blocks (a label the growth step left out) are stepped over and count as part of
    the figure when measuring the gap; a wide block (body text) ends the search. Other
    figure regions stacked in between count as part of the figure too.
    """
    r = region.rect
    # Work in "distance from the figure" so one loop serves both directions.
    sign = 1.0 if downwards else -1.0

    def near_side(b: pymupdf.Rect) -> float:
        return sign * (b.y0 if downwards else b.y1)

    def far_side(b: pymupdf.Rect) -> float:
        return sign * (b.y1 if downwards else b.y0)

    edge = far_side(r)
    candidates = sorted(
        (b for b in blocks if near_side(b.rect) >= edge - 2 and _h_overlaps(b.rect, r)),
        key=lambda b: near_side(b.rect),
    )
    for block in candidates:
        stacked = [
            far_side(o.rect)
            for o in regions
            if _h_overlaps(o.rect, block.rect) and near_side(r) <= far_side(o.rect) <= near_side(block.rect) + 2
        ]
        edge = max([edge, *stacked])
        if near_side(block.rect) - edge > _CAPTION_GAP:
            return None
        if CAPTION_START.match(block.text) or block.rect.width > 0.6 * r.width:
            return block
        edge = max(edge, far_side(block.rect))
    return None


def _render_clip(rect: pymupdf.Rect, lines: Sequence[_Line], page_rect: pymupdf.Rect) -> pymupdf.Rect:
    """The region plus a small margin, pulled back wherever the margin would cut into text
    outside the figure (the caption right under it)."""
    clip = (rect + (-_RENDER_PAD, -_RENDER_PAD, _RENDER_PAD, _RENDER_PAD)) & page_rect
    for line in lines:
        lr = line.rect
        if not clip.intersects(lr) or _overlap(lr, rect) >= 0.8 * _area(lr):
            continue
        if lr.y0 >= rect.y1 - 1:
            clip.y1 = min(clip.y1, max(lr.y0, rect.y1))
        elif lr.y1 <= rect.y0 + 1:
            clip.y0 = max(clip.y0, min(lr.y1, rect.y0))
        elif lr.x0 >= rect.x1 - 1:
            clip.x1 = min(clip.x1, max(lr.x0, rect.x1))
        elif lr.x1 <= rect.x0 + 1:
            clip.x0 = max(clip.x0, min(lr.x1, rect.x0))
    return clip


def _merge_same_caption(regions: list[_Region]) -> list[_Region]:
    """Panels that share one caption ("(left) ... (right)") are one figure."""
    by_caption: dict[int, _Region] = {}
    out: list[_Region] = []
    for region in regions:
        if region.caption_block is None:
            out.append(region)
            continue
        first = by_caption.get(region.caption_block)
        if first is None:
            by_caption[region.caption_block] = region
            out.append(region)
        else:
            first.rect |= region.rect
            if region.source == "raster":
                first.source = "raster"
    return out
