"""Page geometry for the PDF parser: text lines, running headers/footers, columns and
reading order.

Everything here works on `Line` records pulled out of PyMuPDF's "dict" text output, so
the rules can be read (and tested) without knowing PyMuPDF's nested dictionaries.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import pymupdf

from kohaku_rag.document.tree import BBox

# Expand ligatures ("ﬁ" -> "fi") so words are searchable; keep everything else default.
TEXT_FLAGS = (pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_LIGATURES) | pymupdf.TEXT_MEDIABOX_CLIP

_BOLD_FONT = re.compile(r"bold|medi|black|heavy|semibold|demi|bx\d|-bd|\.b$", re.IGNORECASE)
_PAGE_NUMBER = re.compile(
    r"^(?:page\s*)?(?:\d{1,4}|[ivxlcdm]{1,6})(?:\s*(?:/|of)\s*\d{1,4})?$|^[-–—]\s*\d{1,4}\s*[-–—]$",
    re.IGNORECASE,
)
_DIGITS = re.compile(r"\d+")
_SPACES = re.compile(r"\s+")

MARGIN_ZONE = 0.12  # running headers/footers live in the outer 12% of the page height


@dataclass(frozen=True)
class Line:
    """One horizontal text line. `size` is the size carrying most characters."""

    page: int  # 1-based
    bbox: BBox
    baseline: float
    text: str
    size: float
    bold: bool
    block: int
    font: str = ""  # the font carrying most characters ("Helvetica-Bold"), subset prefix removed

    @property
    def style(self) -> tuple[str, float, bool]:
        """What a reader sees of the line's type: font, size (to half a point), weight."""
        return (self.font, round(self.size * 2) / 2, self.bold)

    @property
    def x0(self) -> float:
        return self.bbox[0]

    @property
    def y0(self) -> float:
        return self.bbox[1]

    @property
    def x1(self) -> float:
        return self.bbox[2]

    @property
    def y1(self) -> float:
        return self.bbox[3]

    @property
    def width(self) -> float:
        return self.bbox[2] - self.bbox[0]


@dataclass(frozen=True)
class Placed:
    """A line or float in reading order, with the column segment it belongs to."""

    item: object  # Line or a float record from pdf.py
    page: int
    column: str  # "S" single column, "L"/"R" column, "F" full width on a two-column page
    band: int  # horizontal band between full-width items on a two-column page


def _is_bold(span: dict) -> bool:
    return bool(span["flags"] & pymupdf.TEXT_FONT_BOLD) or bool(_BOLD_FONT.search(span["font"]))


def _span_text(spans: Sequence[dict]) -> str:
    """Spans joined; an exponent after a digit is marked ("10" + raised "20" -> "10^20")."""
    out = ""
    prev_sup = False
    for s in spans:
        sup = bool(s["flags"] & pymupdf.TEXT_FONT_SUPERSCRIPT)
        if sup and not prev_sup and out[-1:].isdigit() and s["text"][:1] in "0123456789−-":
            out += "^"
        out += s["text"]
        prev_sup = sup
    return out


def page_lines(page: pymupdf.Page, page_no: int) -> list[Line]:
    """Horizontal, non-empty text lines of a page. Rotated text (arXiv side stamps,
    vertical axis labels) is dropped here: it is never running text."""
    out: list[Line] = []
    data = page.get_text("dict", flags=TEXT_FLAGS)
    for bno, block in enumerate(data["blocks"]):
        for line in block.get("lines", []):
            dx, dy = line["dir"]
            if abs(dy) > 0.05 or dx <= 0:
                continue
            spans = [s for s in line["spans"] if s["text"]]
            text = _span_text(spans)
            if not text.strip():
                continue
            by_size: Counter[float] = Counter()
            by_font: Counter[str] = Counter()
            alpha = bold_alpha = chars = bold_chars = 0
            for s in spans:
                n = len(s["text"].strip())
                by_size[round(s["size"], 1)] += n
                by_font[s["font"].split("+")[-1]] += n
                letters = sum(ch.isalpha() for ch in s["text"])
                alpha += letters
                bold_alpha += letters if _is_bold(s) else 0
                chars += n
                bold_chars += n if _is_bold(s) else 0
            # judge boldness by letters (math symbols in a heading use other fonts);
            # a line without letters ("3.1") by all its characters
            bold = bold_alpha >= 0.9 * alpha if alpha else bold_chars >= 0.9 * chars
            size = by_size.most_common(1)[0][0]
            main = max(spans, key=lambda s: (len(s["text"].strip()), s["size"]))
            out.append(
                Line(
                    page=page_no,
                    bbox=tuple(round(v, 2) for v in line["bbox"]),
                    baseline=round(main["origin"][1], 2),
                    text=_SPACES.sub(" ", text).strip(),
                    size=size,
                    bold=bold,
                    block=bno,
                    font=by_font.most_common(1)[0][0],
                )
            )
    return out


def body_size(lines: Iterable[Line]) -> float:
    """The most common font size by character count, to the nearest half point
    (TeX output jitters between 9.9, 10.0 and 10.1 for one size)."""
    counts: Counter[float] = Counter()
    for ln in lines:
        counts[round(ln.size * 2) / 2] += len(ln.text)
    return counts.most_common(1)[0][0] if counts else 10.0


def _norm_repeat(text: str) -> str:
    return _SPACES.sub(" ", _DIGITS.sub("#", text.lower())).strip()


def is_page_number(text: str) -> bool:
    return bool(_PAGE_NUMBER.match(text.strip()))


def margin_lines(pages: Sequence[Sequence[Line]], heights: Sequence[float], body: float, *, slides: bool) -> set[Line]:
    """Running headers/footers and page numbers.

    A line counts when it sits in the outer band of the page and either is a bare page
    number, repeats (digits ignored) at about the same height on many pages, or — for
    papers — lies outside the text area that body lines fill on most pages (first-page
    venue footers, which never repeat).
    """
    n_pages = len(pages)
    drop: set[Line] = set()
    zone_lines: list[tuple[Line, str]] = []
    for lines, h in zip(pages, heights):
        for ln in lines:
            if ln.y1 <= h * MARGIN_ZONE:
                side = "top"
            elif ln.y0 >= h * (1 - MARGIN_ZONE):
                side = "bottom"
            else:
                continue
            if is_page_number(ln.text):
                drop.add(ln)
            else:
                zone_lines.append((ln, side))

    groups: dict[tuple[str, str], list[Line]] = defaultdict(list)
    for ln, side in zone_lines:
        groups[(_norm_repeat(ln.text), side)].append(ln)
    need = max(2, math.ceil(0.3 * n_pages))
    for members in groups.values():
        if n_pages < 2 or len({m.page for m in members}) < need:
            continue
        mid = statistics.median(m.y0 for m in members)
        drop.update(m for m in members if abs(m.y0 - mid) <= 6)

    if not slides:
        top, bottom = _text_area(pages, body, drop)
        for ln, side in zone_lines:
            if ln.size > body * 1.05:
                continue
            if (side == "bottom" and ln.y0 >= bottom + 2) or (side == "top" and ln.y1 <= top - 2):
                drop.add(ln)
    return drop


def _text_area(pages: Sequence[Sequence[Line]], body: float, drop: set[Line]) -> tuple[float, float]:
    """Top and bottom of the area body-size lines fill on most pages."""
    tops: list[float] = []
    bottoms: list[float] = []
    for lines in pages:
        body_lines = [ln for ln in lines if abs(ln.size - body) <= 0.6 and ln not in drop]
        if body_lines:
            tops.append(min(ln.y0 for ln in body_lines))
            bottoms.append(max(ln.y1 for ln in body_lines))
    if not tops:
        return -math.inf, math.inf
    tops.sort()
    bottoms.sort()
    return tops[int(0.1 * (len(tops) - 1))], bottoms[math.ceil(0.9 * (len(bottoms) - 1))]


def find_gutter(lines: Sequence[Line], width: float) -> float | None:
    """The x of the gap between two text columns, or None for a single-column page.

    Only lines wider than a fifth of the page vote, so figure labels and table cells do
    not fake columns; a gutter needs several such lines entirely on each side and
    (almost) none crossing it."""
    wide = [ln for ln in lines if ln.width >= 0.2 * width]
    if len(wide) < 6:
        return None
    best: tuple[float, float] | None = None  # (score, x)
    for step in range(int(0.3 * width), int(0.7 * width) + 1, 2):
        x = float(step)
        left = sum(ln.x1 <= x for ln in wide)
        right = sum(ln.x0 >= x for ln in wide)
        cross = len(wide) - left - right
        if left < 3 or right < 3 or cross > 0.2 * (left + right):
            continue
        score = min(left, right) - 3 * cross
        if best is None or score > best[0]:
            best = (score, x)
    if best is None:
        return None
    x = best[1]
    # centre the gutter in the empty strip around the best split
    lefts = [ln.x1 for ln in wide if ln.x1 <= x]
    rights = [ln.x0 for ln in wide if ln.x0 >= x]
    return (max(lefts) + min(rights)) / 2


def merge_baselines(lines: Sequence[Line]) -> list[Line]:
    """Join pieces of one visual line (PyMuPDF splits "3.1" from its title, or a line at
    a wide justified space) into one Line, in top-to-bottom order."""
    ordered = sorted(lines, key=lambda ln: (ln.baseline, ln.x0))
    groups: list[list[Line]] = []
    for ln in ordered:
        if groups and abs(ln.baseline - groups[-1][0].baseline) <= 0.35 * max(ln.size, groups[-1][0].size):
            groups[-1].append(ln)
        else:
            groups.append([ln])
    return [_merge(sorted(g, key=lambda ln: ln.x0)) for g in groups]


def _merge(parts: list[Line]) -> Line:
    if len(parts) == 1:
        return parts[0]
    text = parts[0].text
    for prev, cur in zip(parts, parts[1:]):
        gap = cur.x0 - prev.x1
        text += (" " if gap > 0.12 * cur.size else "") + cur.text
    chars: Counter[float] = Counter()
    for p in parts:
        chars[p.size] += len(p.text)
    main = max(parts, key=lambda p: len(p.text))
    return Line(
        page=parts[0].page,
        bbox=(min(p.x0 for p in parts), min(p.y0 for p in parts), max(p.x1 for p in parts), max(p.y1 for p in parts)),
        baseline=main.baseline,
        text=text,
        size=chars.most_common(1)[0][0],
        bold=all(p.bold for p in parts),
        block=parts[0].block,
    )


def _column_of(bbox: BBox, gutter: float) -> str:
    x0, _, x1, _ = bbox
    if x1 <= gutter + 3:
        return "L"
    if x0 >= gutter - 3:
        return "R"
    if x0 < gutter - 20 and x1 > gutter + 20:
        return "F"
    return "L" if (x0 + x1) / 2 < gutter else "R"


def reading_order(
    page_no: int, lines: Sequence[Line], floats: Sequence[tuple[BBox, object]], gutter: float | None
) -> list[Placed]:
    """Lines and floats of one page in reading order.

    Single column: top to bottom. Two columns: full-width items (title, wide figures and
    tables, wide captions) cut the page into bands; inside a band the left column is
    read before the right one."""
    if gutter is None:
        items: list[tuple[float, int, object, BBox]] = [(ln.y0, 0, ln, ln.bbox) for ln in merge_baselines(lines)]
        items += [(bb[1], 1, f, bb) for bb, f in floats]
        items.sort(key=lambda t: (t[0], t[1]))
        return [Placed(it, page_no, "S", 0) for _, _, it, _ in items]

    by_col: dict[str, list[Line]] = defaultdict(list)
    for ln in lines:
        by_col[_column_of(ln.bbox, gutter)].append(ln)
    entries: list[tuple[str, BBox, object]] = []
    for col, col_lines in by_col.items():
        entries += [(col, ln.bbox, ln) for ln in merge_baselines(col_lines)]
    entries += [(_column_of(bb, gutter), bb, f) for bb, f in floats]

    full = sorted((e for e in entries if e[0] == "F"), key=lambda e: e[1][1])
    cols = [e for e in entries if e[0] != "F"]
    out: list[Placed] = []
    upper = -math.inf
    for band, stop in enumerate([*full, None]):
        lower = math.inf if stop is None else (stop[1][1] + stop[1][3]) / 2
        inside = [e for e in cols if upper <= (e[1][1] + e[1][3]) / 2 < lower]
        for col in ("L", "R"):
            for e in sorted((e for e in inside if e[0] == col), key=lambda e: (e[1][1], e[1][0])):
                out.append(Placed(e[2], page_no, col, band))
        if stop is not None:
            out.append(Placed(stop[2], page_no, "F", band))
            upper = lower
    return out


def segment_lefts(placed: Sequence[Placed]) -> dict[tuple[int, str], float]:
    """Left edge of each (page, column): the most common line start, so that indented
    first lines and centred equations do not move it."""
    starts: dict[tuple[int, str], Counter[int]] = defaultdict(Counter)
    for p in placed:
        if isinstance(p.item, Line):
            starts[(p.page, p.column)][round(p.item.x0)] += 1
    lefts: dict[tuple[int, str], float] = {}
    for key, counts in starts.items():
        top, n = min(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        lefts[key] = float(top) if n > 1 else float(min(counts))
    return lefts


_WORD_BEFORE_HYPHEN = re.compile(r"([A-Za-z]+)-$")
_WORD_AFTER = re.compile(r"^[a-z]+")


def merge_lines_text(parts: Sequence[str], vocabulary: Collection[str] = ()) -> str:
    """Join wrapped lines, repairing end-of-line hyphenation ("methodol-" + "ogy").

    With the document's `vocabulary` (lower-case words seen unbroken elsewhere) a real
    compound keeps its hyphen: "node-" + "level" stays "node-level" when "nodelevel" is
    not a word of the document but "node" and "level" both are."""
    out = ""
    for raw in parts:
        line = raw.strip()
        if not line:
            continue
        if out and re.search(r"[a-z]-$", out) and line[:1].islower() and not _is_compound(out, line, vocabulary):
            out = out[:-1] + line
        elif out and re.search(r"[A-Za-z0-9]-$|\S/$", out) and line[:1].isalnum():
            out += line  # "152-" + "layer", "CIFAR-" + "10": a real hyphen; a URL cut at "/"
        else:
            out = f"{out} {line}" if out else line
    return out


def _is_compound(before: str, after: str, vocabulary: Collection[str]) -> bool:
    """Whether a hyphen at a line end belongs to the word (a compound), judged by the
    document's own words: the joined form is not one of them, both halves are."""
    head, tail = _WORD_BEFORE_HYPHEN.search(before), _WORD_AFTER.match(after)
    if not vocabulary or head is None or tail is None:
        return False
    first, second = head.group(1).lower(), tail.group(0)
    return first + second not in vocabulary and first in vocabulary and second in vocabulary


def vocabulary_of(lines: Iterable[Line]) -> frozenset[str]:
    """Lower-case words the document prints unbroken (not at a line-end hyphen)."""
    words: set[str] = set()
    broken = False  # the previous line ended in a hyphen: this line starts with a word's tail
    for ln in lines:
        found = re.findall(r"[A-Za-z]+", ln.text)
        if broken:
            found = found[1:]
        broken = ln.text.endswith("-")
        if broken:
            found = found[:-1]
        words.update(w.lower() for w in found)
    return frozenset(words)
