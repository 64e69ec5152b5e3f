"""The cited sentence highlighted on its PDF page: the parser keeps each sentence's line
rectangles, and the page PNG differs from a plain render inside them and nowhere else."""

from __future__ import annotations

import io

import numpy as np
import pymupdf
import pytest
from PIL import Image
from starlette.testclient import TestClient

from kohaku_rag.document.tree import NodeKind, build_tree
from kohaku_rag.indexing.steps import read_source, read_tree
from kohaku_rag.lake.layout import Lake
from kohaku_rag.parse.pdf import parse_pdf
from kohaku_rag.parse.sentences import split_sentences
from kohaku_rag.samples.render import render_pdf
from kohaku_rag.serving.documents import snapped_rects
from tests.support.serving_corpus import WATER_MD, WATER_QUESTION


def _source(lake, doc_id: str) -> str:
    return read_source(Lake(lake), doc_id)["path"]


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)


def test_pdf_sentences_keep_the_rectangles_of_their_words(tmp_path) -> None:
    path = tmp_path / "water.pdf"
    path.write_bytes(render_pdf(WATER_MD, columns=1, running_header="Water report", metadata={"title": "Water"}))
    nodes = build_tree(parse_pdf(path, "water"), split_sentences)
    sentences = [n for n in nodes if n.kind is NodeKind.SENTENCE]
    assert sentences and all(s.rects for s in sentences)
    with pymupdf.open(path) as pdf:
        for s in sentences:
            page = pdf[s.rects[0][0] - 1]
            under = " ".join(page.get_textbox(pymupdf.Rect(r[1:])) for r in s.rects)
            words = s.text.split()
            # the first and last words of the sentence lie in its boxes (proportional spacing
            # may cut a neighbour's edge, never lose the sentence's own ends)
            assert words[0].strip(".,") in under and words[-1].strip(".,") in under, (s.text, under)


def test_the_page_png_highlights_the_cited_sentence_only(app, lake) -> None:
    with TestClient(app) as client:
        answer = client.post("/api/ask", json={"question": WATER_QUESTION}).json()
        cited = answer["cited"][0]
        assert cited["doc_id"] == "water" and cited["page"] == 1
        sentence_id = cited["sentence_id"]
        plain = client.get("/api/documents/water/pages/1.png")
        marked = client.get(f"/api/documents/water/pages/1.png?highlight={sentence_id}")
    assert plain.status_code == marked.status_code == 200 and marked.headers["content-type"] == "image/png"
    (sentence,) = [n for n in read_tree(Lake(lake), "water") if n.node_id == sentence_id]
    assert "0.18" in sentence.text and sentence.rects
    a, b = pixels(plain.content), pixels(marked.content)
    assert a.shape == b.shape
    with pymupdf.open(_source(lake, "water")) as pdf:
        painted = snapped_rects(pdf[0], [sentence], 1)
    # the painted boxes are the tree's, their ends on the sentence's first and last words
    assert len(painted) == len(sentence.rects)
    assert all(abs(p[1] - r[1]) < 30 and abs(p[3] - r[3]) < 30 for p, r in zip(painted, sentence.rects))
    scale = a.shape[1] / 612  # the page is US letter, 612 pt wide
    inside = np.zeros(a.shape[:2], bool)
    near = np.zeros(a.shape[:2], bool)
    for _page, x0, y0, x1, y1 in painted:
        inside[int(y0 * scale) + 2 : int(y1 * scale) - 2, int(x0 * scale) + 2 : int(x1 * scale) - 2] = True
        near[max(0, int(y0 * scale) - 3) : int(y1 * scale) + 3, max(0, int(x0 * scale) - 3) : int(x1 * scale) + 3] = (
            True
        )
    changed = np.abs(a - b).sum(axis=2) > 0
    assert changed[inside].mean() > 0.95  # the sentence is painted over
    assert not changed[~near].any()  # nothing else moved
    with pymupdf.open(_source(lake, "water")) as pdf:
        words = pdf[0].get_text("words")
    first, last = sentence.text.split()[0], sentence.text.split()[-1]
    (p0, pn) = painted[0], painted[-1]
    assert any(w[4] == first and abs(w[0] - p0[1]) < 0.5 for w in words)  # starts on its first word
    assert any(w[4] == last and abs(w[2] - pn[3]) < 0.5 for w in words)  # ends after its last word
    # the highlight is the marker's yellow: more red+green than blue where the page was white
    white = inside & (a.sum(axis=2) == 765)
    assert (b[white][:, 2] < 200).all()


@pytest.mark.parametrize("node_kind", ["paragraph", "sentence"])
def test_a_paragraph_highlights_all_its_sentences(app, lake, node_kind) -> None:
    tree = read_tree(Lake(lake), "water")
    para = next(n for n in tree if n.kind is NodeKind.PARAGRAPH and "0.18" in n.text)
    kids = [n for n in tree if n.parent_id == para.node_id]
    assert len(kids) == 3
    node = para if node_kind == "paragraph" else kids[0]
    with TestClient(app) as client:
        plain = pixels(client.get("/api/documents/water/pages/1.png").content)
        marked = pixels(client.get(f"/api/documents/water/pages/1.png?highlight={node.node_id}").content)
    changed = np.abs(plain - marked).sum(axis=2) > 0
    scale = plain.shape[1] / 612
    last = kids[-1].rects[-1]
    mid = (int((last[2] + last[4]) / 2 * scale), int((last[1] + last[3]) / 2 * scale))
    assert changed[mid] == (node_kind == "paragraph")  # the third sentence: marked only with its paragraph
