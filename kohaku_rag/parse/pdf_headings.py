"""Titles and section headings of a PDF: the document title, the outline (bookmarks) placed
on its heading lines, the heading styles that recur, and the test whether a line starts a
section (the rules are described in `pdf.py`'s docstring)."""

from __future__ import annotations

import difflib
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kohaku_rag.parse.pdf_layout import Line, Placed, merge_lines_text
from kohaku_rag.parse.pdf_page_items import PdfPage

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
_BAD_META_TITLE = re.compile(
    r"\.(pdf|docx?|tex|dvi|pptx?|indd|rtf)$|^untitled|^microsoft (word|powerpoint)|[\\/]", re.I
)
_NORM = re.compile(r"[^a-z0-9]+")
_RUN_IN = re.compile(r"[a-z]\.\s+\S")
# Math fonts set formulas apart from the body too; a line in one is never a heading.
_MATH_FONT = re.compile(r"^(?:CMMI|CMSY|CMEX|MSBM|MSAM|STIXMath|Cambria-?Math|Symbol)|Math", re.IGNORECASE)


# ---------------------------------------------------------------- titles


def document_title(given: str | None, meta: dict[str, str], pages: Sequence[PdfPage]) -> tuple[str, str]:
    if given and given.strip():
        return given.strip(), "argument"
    meta_title = (meta.get("title") or "").strip()
    if len(meta_title) >= 4 and any(c.isalpha() for c in meta_title) and not _BAD_META_TITLE.search(meta_title):
        return meta_title, "metadata"
    lines = title_lines(pages)
    if lines:
        return merge_lines_text([ln.text for ln in lines]), "page1"
    return "", "none"


def title_lines(pages: Sequence[PdfPage]) -> list[Line]:
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


# ---------------------------------------------------------------- headings


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
class TextStyle:
    """What body text looks like in this document, and the styles its headings recur in."""

    body: float
    body_font: str
    heading_styles: frozenset[tuple[str, float, bool]]
    title_keys: _LineSet  # the document title's lines


@dataclass(frozen=True)
class Outline:
    """The PDF's bookmarks placed in the text flow: the lines that start each entry."""

    keys: _LineSet  # each placed entry's first line
    unplaced: frozenset[int]  # pages of entries found nowhere (layout decides there)
    last_page: int  # the page of the last entry: layout decides after it (appendices)

    def covers(self, page: int) -> bool:
        return bool(self.keys) and page not in self.unplaced and page <= self.last_page


def place_outline(toc: Sequence[Sequence[object]], pages: Sequence[PdfPage], style: TextStyle) -> Outline | None:
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
    return Outline(_LineSet.of(found_lines), frozenset(unplaced), max(int(str(e[2])) for e in toc))


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


def _set_apart(ln: Line, style: TextStyle) -> bool:
    """Typeset unlike body text: larger, bold, or another font at body size."""
    if ln.size >= 1.2 * style.body - 0.05:
        return True
    if ln.size < style.body - 0.3:
        return False  # captions, footnotes, affiliations
    return ln.bold or (bool(ln.font) and ln.font != style.body_font)


def _shape_ok(text: str) -> bool:
    words = text.split()
    return 2 <= len(text) <= 120 and len(words) <= 16 and any(c.isalpha() for c in text) and text[-1] not in ",;"


def text_style(pages: Sequence[PdfPage], body: float, title_lines: Sequence[Line]) -> TextStyle:
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
    base = TextStyle(body, body_font, frozenset(), _LineSet.of(title_lines))
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
    return TextStyle(body, body_font, styles, base.title_keys)


def is_heading(ln: Line, style: TextStyle, outline: Outline | None, front: bool = False) -> bool:
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


def heading_text(placed: Sequence[Placed], i: int) -> tuple[str, int]:
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
