"""A small self-generated corpus: three Markdown notes on the energy and carbon
footprint of machine learning, rendered into real PDFs, plus broken PDFs for tests.

The notes are original text written for this project with illustrative numbers. The
PDFs are built with PyMuPDF alone (one two-column, each with a numeric table and a
vector bar chart), so anyone can regenerate the corpus offline and byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pymupdf

from kohaku_rag.lake.csv_cells import csv_text
from kohaku_rag.lake.tables import write_bytes_atomic
from kohaku_rag.samples.render import parse_markdown, render_pdf

FIXED_DATE = "D:20250101000000Z"  # fixed so the output is deterministic
SAMPLE_YEAR = "2025"


@dataclass(frozen=True)
class SampleSpec:
    doc_id: str
    columns: int


SAMPLES: tuple[SampleSpec, ...] = (
    SampleSpec("sample_gpu_energy", columns=1),
    SampleSpec("sample_datacenter_carbon", columns=2),
    SampleSpec("sample_inference_water", columns=1),
)

METADATA_FIELDS = ("id", "type", "title", "year", "citation", "url")


def sample_markdown(doc_id: str) -> str:
    return resources.files(__package__).joinpath(f"{doc_id}.md").read_text(encoding="utf-8")


def sample_title(doc_id: str) -> str:
    return next(b.text for b in parse_markdown(sample_markdown(doc_id)) if b.kind == "title")


def sample_headings(doc_id: str) -> list[str]:
    """The numbered headings of a sample, in order (what a parser should find)."""
    return [b.text for b in parse_markdown(sample_markdown(doc_id)) if b.kind in ("h2", "h3")]


def write_sample_corpus(dest: Path) -> list[Path]:
    """Write `<id>.pdf` for each sample and a `metadata.csv`; return the PDF paths."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    rows: list[dict[str, str]] = []
    for spec in SAMPLES:
        title = sample_title(spec.doc_id)
        meta = {
            "title": title,
            "author": "kohaku-lake",
            "subject": "energy and carbon footprint of machine learning",
            "creator": "kohaku_rag.samples",
            "producer": "PyMuPDF",
            "creationDate": FIXED_DATE,
            "modDate": FIXED_DATE,
        }
        pdf = render_pdf(
            sample_markdown(spec.doc_id),
            columns=spec.columns,
            running_header=f"kohaku-lake sample corpus | {title}",
            metadata=meta,
        )
        path = dest / f"{spec.doc_id}.pdf"
        write_bytes_atomic(path, pdf)
        paths.append(path)
        rows.append(
            {
                "id": spec.doc_id,
                "type": "report",
                "title": title,
                "year": SAMPLE_YEAR,
                "citation": f"kohaku-lake sample corpus ({SAMPLE_YEAR}). {title}. Illustrative note, not a real study.",
                "url": "",
            }
        )
    write_bytes_atomic(dest / "metadata.csv", csv_text(METADATA_FIELDS, rows).encode("utf-8"))
    return paths


def make_bad_pdfs(dest: Path) -> dict[str, Path]:
    """Broken inputs, one per failure a PDF parser must report: `corrupt` (truncated
    bytes), `encrypted` (needs a user password), `empty` (a page without text) and
    `image_only` (a scanned page: text only as pixels)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    text_pdf = _one_page_pdf("This page has a normal text layer. " * 20)
    out = {
        "corrupt": dest / "bad_corrupt.pdf",
        "encrypted": dest / "bad_encrypted.pdf",
        "empty": dest / "bad_empty.pdf",
        "image_only": dest / "bad_image_only.pdf",
    }
    # keep the header and the first object only: no page tree, no xref, no trailer
    write_bytes_atomic(out["corrupt"], text_pdf[:200])
    write_bytes_atomic(out["encrypted"], _encrypted(text_pdf))
    write_bytes_atomic(out["empty"], _blank_pdf())
    write_bytes_atomic(out["image_only"], _scanned(text_pdf))
    return out


def _save(doc: pymupdf.Document, **kwargs: object) -> bytes:
    doc.set_metadata({"creationDate": FIXED_DATE, "modDate": FIXED_DATE, "producer": "PyMuPDF"})
    data = doc.tobytes(garbage=3, deflate=True, no_new_id=True, **kwargs)
    doc.close()
    return data


def _one_page_pdf(text: str) -> bytes:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_textbox(pymupdf.Rect(72, 72, 540, 720), text, fontsize=12)
    return _save(doc)


def _blank_pdf() -> bytes:
    doc = pymupdf.open()
    page = doc.new_page()
    page.draw_rect(pymupdf.Rect(72, 72, 540, 720), color=(0.8, 0.8, 0.8))  # a frame, no text
    return _save(doc)


def _encrypted(pdf: bytes) -> bytes:
    doc = pymupdf.open("pdf", pdf)
    return _save(doc, encryption=pymupdf.mupdf.PDF_ENCRYPT_AES_256, user_pw="kohaku-user", owner_pw="kohaku-owner")


def _scanned(pdf: bytes) -> bytes:
    """The text page rendered to pixels and placed as the only content of a page."""
    src = pymupdf.open("pdf", pdf)
    png = src[0].get_pixmap(dpi=100).tobytes("png")
    rect = src[0].rect
    src.close()
    doc = pymupdf.open()
    page = doc.new_page(width=rect.width, height=rect.height)
    page.insert_image(rect, stream=png)
    return _save(doc)
