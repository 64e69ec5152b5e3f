"""A document with no metadata.csv row is titled by what its parser read (a PDF's own title),
never by its file name."""

from __future__ import annotations

from pathlib import Path

import kohaku_rag as kr
from kohaku_rag.lake.layout import Lake
from kohaku_rag.samples.render import render_pdf
from kohaku_rag.serving.documents import Documents

TEXT = "# Cooling\n\n## 1 Towers\n\nThe water usage effectiveness was 0.18 liters per kWh in 2023.\n"


def test_a_pdf_without_a_metadata_row_takes_its_own_title(tmp_path: Path) -> None:
    """Before: the ask page's chip read "report_2023", the file name."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "report_2023.pdf").write_bytes(
        render_pdf(TEXT, columns=1, running_header="Audit", metadata={"title": "Cooling water audit"})
    )
    (corpus / "listed.pdf").write_bytes(
        render_pdf(TEXT, columns=1, running_header="Audit", metadata={"title": "Its own title"})
    )
    (corpus / "metadata.csv").write_text("id,title,url\nlisted,The listed title,https://example.org/a.pdf\n")
    summary = kr.index(corpus, tmp_path / "lake", progress=lambda _m: None)
    assert not summary.failed, summary.failed
    docs = Documents(Lake(tmp_path / "lake"))
    assert docs.info("report_2023").title == "Cooling water audit"
    assert docs.info("listed").title == "The listed title"  # metadata.csv still comes first
