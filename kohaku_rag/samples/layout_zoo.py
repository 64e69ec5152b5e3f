"""A layout zoo: the same text rendered in several publisher-like PDF layouts, with known headings.

The parser is measured on layouts a data team's folder is full of, not only on LaTeX
papers: a Springer-like journal article (unnumbered bold sans headings at 1.1x a serif
body, two columns, running headers, a heading wrapped over two lines, non-breaking spaces),
an IEEE-like paper (roman-numbered upper-case section headings at body size, lettered
italic subsections), and a Word/InDesign-like report (coloured unnumbered headings, one
column, a footer with the page number). Each PDF comes with the headings a parser should
find and the running header/footer text that must not reach the body.

Only PyMuPDF's built-in fonts are used, so the output is the same on every machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pymupdf

from kohaku_rag.lake.tables import write_bytes_atomic

NBSP = "\u00a0"

_SENTENCES = (
    "Training a large model draws power from accelerators, host processors, memory and the network for weeks.",
    "We measured node-level energy with calibrated meters and compared it with estimates from rated power.",
    "Estimates from rated power overstate the measured device energy by about thirty percent on average.",
    "The state-of-the-art accelerators idle at a substantial fraction of their peak power between steps.",
    "Cooling adds an overhead that the power usage effectiveness of the facility captures for the whole site.",
    "Carbon emissions follow from the energy drawn and the carbon intensity of the regional electricity grid.",
    "Energy-efficient scheduling shifts flexible jobs to hours when renewable generation is plentiful.",
    "Water withdrawn for evaporative cooling depends on the climate and on the season of the deployment.",
    "Inference dominates the lifetime energy of a widely deployed model after a few months of service.",
    "Reporting standards differ between organisations, which makes comparisons of published numbers difficult.",
)


@dataclass(frozen=True)
class Heading:
    level: int  # 1 section, 2 subsection
    text: str  # as printed, numbering included


@dataclass(frozen=True)
class ZooStyle:
    name: str
    width: float
    height: float
    columns: int
    body_font: str
    body_size: float
    h1_font: str
    h1_size: float
    h2_font: str
    h2_size: float
    numbering: str  # "none", "ieee" (I., II. / A., B.), "arabic" (1, 1.1)
    upper_h1: bool = False
    center_h1: bool = False
    color: tuple[float, float, float] = (0, 0, 0)
    header: str = ""  # running header; {page} is replaced by the page number
    footer: str = ""
    nbsp_in_headings: bool = False
    margin: float = 54.0
    gutter: float = 18.0


STYLES: dict[str, ZooStyle] = {
    "springer": ZooStyle(
        "springer", 595.0, 842.0, 2, "tiro", 9.5, "hebo", 10.5, "hebo", 9.5, "none",
        header="Journal of Sustainable Computing (2024) 12:{page}\u2013367", footer="{page}",
        nbsp_in_headings=True, margin=50.0,
    ),
    "ieee": ZooStyle(
        "ieee", 612.0, 792.0, 2, "tiro", 10.0, "tiro", 10.0, "tiit", 10.0, "ieee", upper_h1=True, center_h1=True,
        header="IEEE TRANSACTIONS ON SUSTAINABLE COMPUTING, VOL. 9, NO. 2, 2024 {page}",
    ),
    "report": ZooStyle(
        "report", 612.0, 792.0, 1, "helv", 10.5, "hebo", 16.0, "hebo", 12.5, "none", color=(0.05, 0.3, 0.6),
        footer="Acme Corp Sustainability Report 2023 | Page {page}", margin=72.0,
    ),
}  # fmt: skip

# The document every style renders: (level, heading) followed by paragraphs of sentences.
_OUTLINE: tuple[tuple[int, str, int], ...] = (
    (1, "Introduction", 3),
    (1, "Energy measurement methodology for large model training clusters", 4),
    (2, "Metering setup", 2),
    (2, "Estimates from rated power", 3),
    (1, "Results", 3),
    (2, "Training runs", 2),
    (1, "Discussion", 4),
    (1, "Conclusion", 2),
    (1, "References", 0),
)


@dataclass
class _Writer:
    style: ZooStyle
    doc: pymupdf.Document = field(default_factory=pymupdf.open)
    page: pymupdf.Page | None = None
    col: int = 0
    y: float = 0.0
    top: float = 0.0

    def __post_init__(self) -> None:
        self._new_page()

    @property
    def frames(self) -> list[tuple[float, float]]:
        s = self.style
        if s.columns == 1:
            return [(s.margin, s.width - s.margin)]
        w = (s.width - 2 * s.margin - s.gutter) / 2
        return [(s.margin, s.margin + w), (s.margin + w + s.gutter, s.width - s.margin)]

    def _new_page(self) -> None:
        s = self.style
        self.page = self.doc.new_page(width=s.width, height=s.height)
        number = self.doc.page_count
        if s.header:
            self.page.insert_text((s.margin, 36), s.header.format(page=number + 344), fontname="tiit", fontsize=8)
        if s.footer:
            text = s.footer.format(page=number + 344 if s.footer == "{page}" else number)
            x = s.width / 2 - pymupdf.get_text_length(text, fontname="helv", fontsize=8) / 2
            self.page.insert_text((x, s.height - 30), text, fontname="helv", fontsize=8)
        self.col, self.y, self.top = 0, 64.0, 64.0

    def _advance(self, height: float) -> None:
        if self.y + height > self.style.height - 56:
            if self.col + 1 < len(self.frames):
                self.col += 1
                self.y = self.top
            else:
                self._new_page()

    def full_width(self, text: str, font: str, size: float, gap: float) -> None:
        x0, x1 = self.frames[0][0], self.frames[-1][1]
        for line in _wrap(text, font, size, x1 - x0, hyphenate=False):
            self.y += size * 1.25
            x = (x0 + x1) / 2 - pymupdf.get_text_length(line, fontname=font, fontsize=size) / 2
            assert self.page is not None
            self.page.insert_text((x, self.y), line, fontname=font, fontsize=size)
        self.y += gap
        self.top = self.y

    def block(
        self,
        text: str,
        font: str,
        size: float,
        *,
        before: float,
        after: float,
        center: bool = False,
        color: tuple[float, float, float] = (0, 0, 0),
        hyphenate: bool = True,
        keep: float = 0.0,
    ) -> None:
        x0, x1 = self.frames[self.col]
        lines = _wrap(text, font, size, x1 - x0, hyphenate=hyphenate)
        self._advance(before + len(lines) * size * 1.25 + keep)
        if self.y > self.top:
            self.y += before
        for line in lines:
            self._advance(size * 1.25)
            x0, x1 = self.frames[self.col]
            self.y += size * 1.25
            width = pymupdf.get_text_length(line, fontname=font, fontsize=size)
            x = (x0 + x1) / 2 - width / 2 if center else x0
            assert self.page is not None
            self.page.insert_text((x, self.y), line, fontname=font, fontsize=size, color=color)
        self.y += after


def _wrap(text: str, font: str, size: float, width: float, *, hyphenate: bool) -> list[str]:
    """Greedy line breaking; a long word that does not fit is hyphenated (compounds at
    their hyphen, others in the middle), as typesetters do."""
    lines: list[str] = []
    line = ""
    # A publisher's non-breaking spaces still break a heading too long for its column
    # (the PDF then holds NBSPs between the words of each line).
    space = NBSP if NBSP in text else " "
    for word in text.replace(NBSP, " ").split(" "):
        trial = f"{line}{space}{word}" if line else word
        if pymupdf.get_text_length(trial, fontname=font, fontsize=size) <= width:
            line = trial
            continue
        if hyphenate and len(word) >= 9:
            cut = word.index("-") + 1 if "-" in word[:-2] else len(word) // 2
            head = word[:cut] if word[cut - 1] == "-" else word[:cut] + "-"
            if pymupdf.get_text_length(f"{line}{space}{head}", fontname=font, fontsize=size) <= width:
                lines.append(f"{line}{space}{head}".strip())
                line = word[cut:]
                continue
        lines.append(line)
        line = word
    if line:
        lines.append(line)
    return lines


def _numbered(style: ZooStyle, outline: Sequence[tuple[int, str, int]]) -> list[Heading]:
    out: list[Heading] = []
    n1 = n2 = 0
    for level, text, _ in outline:
        if style.numbering == "none" or text == "References":
            label = text.upper() if style.upper_h1 and level == 1 else text
        elif level == 1:
            n1 += 1
            n2 = 0
            number = _roman(n1) + "." if style.numbering == "ieee" else str(n1)
            label = f"{number} {text.upper() if style.upper_h1 else text}"
        else:
            n2 += 1
            number = f"{chr(64 + n2)}." if style.numbering == "ieee" else f"{n1}.{n2}"
            label = f"{number} {text}"
        out.append(Heading(level, label))
    return out


def _roman(n: int) -> str:
    return ["I", "II", "III", "IV", "V", "VI", "VII", "VIII", "IX", "X"][n - 1]


def render_zoo(style: ZooStyle, *, outline: bool = False) -> tuple[bytes, list[Heading]]:
    """The PDF bytes of `style` and the headings it prints, in order; with `outline`, the
    PDF also carries them as bookmarks (as most publisher PDFs do)."""
    s = style
    w = _Writer(s)
    w.full_width("Energy and carbon accounting for machine learning at scale", "hebo", 16.0, 4.0)
    w.full_width("A. Author \u00b7 B. Author \u00b7 C. Author", "helv", 9.0, 2.0)
    w.full_width("Institute for Computing Sustainability, 12 Example Road, Springfield", "helv", 7.5, 14.0)
    w.block("Abstract", s.h2_font if s.numbering == "ieee" else "hebo", s.body_size, before=0, after=2)
    w.block(" ".join(_SENTENCES[:3]), s.body_font, s.body_size - 0.5, before=0, after=8)
    headings = _numbered(s, _OUTLINE)
    toc: list[list[object]] = []
    k = 0
    for heading, (level, _, paragraphs) in zip(headings, _OUTLINE, strict=True):
        text = heading.text.replace(" ", NBSP) if s.nbsp_in_headings else heading.text
        if level == 1:
            w.block(
                text,
                s.h1_font,
                s.h1_size,
                before=s.body_size * 1.2,
                after=s.body_size * 0.5,
                center=s.center_h1,
                color=s.color,
                hyphenate=False,
                keep=3 * s.body_size * 1.25,
            )
        else:
            w.block(
                text,
                s.h2_font,
                s.h2_size,
                before=s.body_size * 0.8,
                after=s.body_size * 0.3,
                color=s.color,
                hyphenate=False,
                keep=3 * s.body_size * 1.25,
            )
        toc.append([level, heading.text, w.doc.page_count])
        if heading.text == "References":
            for n in range(4):
                w.block(
                    f"[{n + 1}] Author {chr(65 + n)} (2023) {_SENTENCES[n][:60]}. Journal 4:{10 + n}",
                    s.body_font,
                    s.body_size - 1,
                    before=0,
                    after=1,
                )
            continue
        for _ in range(paragraphs):
            sentences = [_SENTENCES[(k + j) % len(_SENTENCES)] for j in range(4)]
            k += 3
            w.block(" ".join(sentences), s.body_font, s.body_size, before=0, after=s.body_size * 0.4)
    if outline:
        w.doc.set_toc(toc)
    data = w.doc.tobytes(garbage=3, deflate=True)
    w.doc.close()
    return data, headings


def running_texts(style: ZooStyle) -> list[str]:
    """Header/footer text (page numbers left out) that must not appear in the body."""
    parts = [p.split("{page}")[0].strip(" |") for p in (style.header, style.footer)]
    return [p for p in parts if len(p) > 3]


def write_zoo(dest: Path, *, outline: bool = False) -> dict[str, tuple[Path, list[Heading]]]:
    """Write `zoo_<style>.pdf` for every style; name -> (path, its headings)."""
    dest = Path(dest)
    out: dict[str, tuple[Path, list[Heading]]] = {}
    for name, style in STYLES.items():
        data, headings = render_zoo(style, outline=outline)
        path = dest / f"zoo_{name}{'_outline' if outline else ''}.pdf"
        write_bytes_atomic(path, data)
        out[name] = (path, headings)
    return out
