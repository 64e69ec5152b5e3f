"""A cited table, precisely: the parser keeps a rectangle per table row and caption line, and
the page highlights the caption and the row that states the value (not every row, and not
cut short inside the last column); the text view and the quote show that row."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pymupdf
import pytest
from asgi_server import serving
from PIL import Image

import kohaku_rag as kr
from kohaku_rag.indexing.steps import read_tree
from kohaku_rag.lake import Lake
from kohaku_rag.parse.pdf import parse_pdf
from kohaku_rag.parse.sentences import split_sentences
from kohaku_rag.samples.render import render_pdf
from kohaku_rag.serving.app import build_app
from kohaku_rag.serving.settings import ServeSettings
from kohaku_rag.serving.table_rows import table_quote, table_rects
from kohaku_rag.tree import Attachment, NodeKind, build_tree

ENERGY_MD = """# Energy

## 1 Runs

We trained three models on the same cluster and metered each device over the whole run.

Table 2: Device energy per training run, metered at the wall.

| Run | Energy (kWh) | Hours |
|---|---|---|
| A | 12.5 | 10 |
| B | 41.0 | 30 |
| C | 77.3 | 52 |

The metered energy grew with the length of the run.
"""


@pytest.fixture(scope="module")
def energy_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("energy") / "corpus"
    folder.mkdir()
    path = folder / "energy.pdf"
    path.write_bytes(render_pdf(ENERGY_MD, columns=1, running_header="Energy report", metadata={"title": "Energy"}))
    return path


def table_sentence(nodes):  # noqa: ANN001, ANN201
    return next(n for n in nodes if n.kind is NodeKind.SENTENCE and n.attachment is Attachment.TABLE)


def test_a_table_keeps_a_rectangle_per_row_and_caption_line(energy_pdf: Path) -> None:
    """Fails on main: a table had one rectangle, the table's box without its caption."""
    table = table_sentence(build_tree(parse_pdf(energy_pdf, "energy"), split_sentences))
    assert table.text.splitlines()[0].startswith("Table 2:") and "B | 41.0 | 30" in table.text
    assert len(table.rects) == 5  # the caption's line and four rows (the header is a row)
    with pymupdf.open(energy_pdf) as pdf:
        page = pdf[0]
        under = [" ".join(page.get_textbox(pymupdf.Rect(r[1:])).split()) for r in table.rects]
    assert under[0].startswith("Table 2: Device energy")
    assert under[1:] == ["Run Energy (kWh) Hours", "A 12.5 10", "B 41.0 30", "C 77.3 52"]
    painted = table_rects(table, "41.0")
    assert painted == [table.rects[0], table.rects[3]]  # the caption and row B
    assert table_rects(table, "999") == list(table.rects)  # no row states it: every row
    assert (
        table_quote(table.text, "41.0")
        == "Table 2: Device energy per training run, metered at the wall.\nB | 41.0 | 30"
    )


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)


def test_the_page_highlights_the_caption_and_the_stating_row(energy_pdf: Path, tmp_path: Path) -> None:
    """Fails on main: every row was highlighted, the caption was not, and the highlight
    stopped at the table's last word spelled like the text's last token."""
    import httpx

    lake = tmp_path / "lake"
    assert not kr.index(energy_pdf.parent, lake, progress=lambda _m: None).failed
    table = table_sentence(read_tree(Lake(lake), "energy"))
    base = "/api/documents/energy"
    with serving(build_app(ServeSettings(lake=lake))) as url:
        plain = pixels(httpx.get(f"{url}{base}/pages/1.png", timeout=30).content)
        marked = pixels(httpx.get(f"{url}{base}/pages/1.png?highlight={table.node_id}&value=41.0", timeout=30).content)
        text = httpx.get(f"{url}{base}/text?highlight={table.node_id}&value=41.0", timeout=30).json()
    changed = np.abs(plain - marked).sum(axis=2) > 0
    scale = plain.shape[1] / 612

    def painted(rect, x: float) -> bool:  # noqa: ANN001
        return bool(changed[int((rect[2] + rect[4]) / 2 * scale), int(x * scale)])

    caption, header, row_a, row_b, row_c = table.rects
    assert painted(caption, (caption[1] + caption[3]) / 2)
    right = row_b[3] - 3  # the row's last column, at its right edge
    assert painted(row_b, row_b[1] + 3) and painted(row_b, right)
    assert not any(painted(r, (r[1] + r[3]) / 2) for r in (header, row_a, row_c))
    marks = [p["text"].strip() for p in text["parts"] if p["marked"]]
    assert marks == ["Table 2: Device energy per training run, metered at the wall.", "B | 41.0 | 30"]
