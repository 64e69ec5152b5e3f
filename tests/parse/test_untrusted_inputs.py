"""Untrusted inputs cost bounded memory and fail with the file named: huge figure regions,
too many pages, JSON payloads of the wrong shape or nested absurdly deep."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pymupdf
import pytest
from PIL import Image

from kohaku_rag.document.tree import Attachment
from kohaku_rag.errors import DocumentError
from kohaku_rag.parse import limits
from kohaku_rag.parse.payload import parse_payload_json
from kohaku_rag.parse.pdf import parse_pdf

BODY = "The measured power draw of the accelerator was 400 W during the whole training run."


def big_figure_pdf(path: Path) -> Path:
    """A 6 KB PDF whose one figure (an 8x8 image drawn 2,800 points wide) renders to
    34 megapixels at the parser's 150 dpi."""
    doc = pymupdf.open()
    page = doc.new_page(width=4000, height=4000)
    for k in range(6):
        page.insert_text((40, 60 + 14 * k), BODY, fontsize=11)
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(buf, format="PNG")
    page.insert_image(pymupdf.Rect(40, 200, 2840, 3000), stream=buf.getvalue())
    page.insert_text((40, 3020), "Figure 1. A huge figure.", fontsize=11)
    doc.save(path)
    return path


def test_an_oversize_figure_is_skipped_with_a_warning_and_the_document_indexes(tmp_path, caplog):
    path = big_figure_pdf(tmp_path / "bomb.pdf")
    with caplog.at_level(logging.WARNING):
        parsed = parse_pdf(path, "bomb")
    paragraphs = [p for s in parsed.sections for p in s.paragraphs]
    assert not [p for p in paragraphs if p.attachment is Attachment.IMAGE]
    assert any("400 W" in p.text for p in paragraphs)
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert "bomb.pdf" in warning and "page 1" in warning and "megapixel" in warning


def test_too_many_pages_is_a_clear_document_error(tmp_path, monkeypatch):
    doc = pymupdf.open()
    for _ in range(3):
        doc.new_page().insert_text((72, 72), BODY)
    doc.save(tmp_path / "long.pdf")
    monkeypatch.setattr(limits, "MAX_PAGES", 2)
    with pytest.raises(DocumentError, match=r"long\.pdf: 3 pages, over the limit of 2"):
        parse_pdf(tmp_path / "long.pdf", "long")


def test_too_much_text_is_a_clear_document_error(tmp_path, monkeypatch):
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"sections": [{"paragraphs": [{"text": BODY * 10}]}]}))
    monkeypatch.setattr(limits, "MAX_TEXT_CHARS", 100)
    with pytest.raises(DocumentError, match=r"big\.json: .* characters, over the limit of 100"):
        parse_payload_json(path, "big")


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ({"sections": ["a page"]}, "sections[0] is str"),
        ({"sections": [{"paragraphs": "text"}]}, "sections[0].paragraphs is str"),
        ({"sections": [{"paragraphs": [["x"]]}]}, "sections[0].paragraphs[0] is list"),
        ({"sections": [{"paragraphs": [{"text": {"a": 1}}]}]}, "sections[0].paragraphs[0].text is dict"),
        ({"sections": [{"metadata": [1], "paragraphs": []}]}, "sections[0].metadata is list"),
        ({"metadata": "x", "sections": []}, "'metadata' is str"),
    ],
)
def test_a_payload_of_the_wrong_shape_names_the_file_and_the_part(tmp_path, payload, where):
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(payload))
    with pytest.raises(DocumentError) as err:
        parse_payload_json(path, "odd")
    assert "odd.json" in str(err.value) and where in str(err.value)


def test_a_payload_nested_200000_deep_names_the_file(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"sections": ' + "[" * 200_000 + "]" * 200_000 + "}")
    with pytest.raises(DocumentError, match=r"deep\.json: .*nested too deeply"):
        parse_payload_json(path, "deep")
