"""A cited table, precisely: the parser keeps the table as a record (caption, column names,
rows, a box per cell), and the page highlights the caption, the cell that states the value,
its row's label and its column's header; the text view and the quote show that row, and the
citation names the cell."""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np
import pymupdf
import pytest
from PIL import Image

import kohaku_rag as kr
from kohaku_rag.document.tree import Attachment, NodeKind, build_tree
from kohaku_rag.indexing.index_config import IndexConfig
from kohaku_rag.indexing.steps import read_tree
from kohaku_rag.lake.layout import Lake
from kohaku_rag.parse.pdf import parse_pdf
from kohaku_rag.parse.sentences import split_sentences
from kohaku_rag.samples.render import render_pdf
from kohaku_rag.serving.app import build_app
from kohaku_rag.serving.settings import ServeSettings
from kohaku_rag.serving.table_rows import cell_rects, record_quote
from tests.support.asgi_server import serving
from tests.support.browser import chromium, chromium_missing
from tests.support.serving_corpus import write_config

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


RECORDS = IndexConfig(table_records=True)  # tables kept as records (off by default)


@pytest.fixture(scope="module")
def energy_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("energy") / "corpus"
    folder.mkdir()
    path = folder / "energy.pdf"
    path.write_bytes(render_pdf(ENERGY_MD, columns=1, running_header="Energy report", metadata={"title": "Energy"}))
    return path


def table_paragraph(nodes):  # noqa: ANN001, ANN201
    return next(n for n in nodes if n.kind is NodeKind.PARAGRAPH and n.attachment is Attachment.TABLE)


def children(nodes, para):  # noqa: ANN001, ANN201
    return [n for n in nodes if n.parent_id == para.node_id]


def under(pdf_path: Path, rect) -> str:  # noqa: ANN001
    with pymupdf.open(pdf_path) as pdf:
        return " ".join(pdf[rect[0] - 1].get_textbox(pymupdf.Rect(rect[1:])).split())


def test_a_pdf_table_is_a_record_with_a_node_per_row_and_a_box_per_cell(energy_pdf: Path) -> None:
    """A PDF table is a record: a node per row, column names carried by every row, a box per
    cell (not one sentence of `a | b | c` lines with a rectangle per printed row)."""
    nodes = build_tree(parse_pdf(energy_pdf, "energy"), split_sentences)
    para = table_paragraph(nodes)
    table = para.table
    assert table is not None and table.label == "Table 2"
    assert table.label_header == "Run" and table.columns == ("Energy (kWh)", "Hours")
    assert [(r.label, r.cells) for r in table.rows] == [
        ("A", ("12.5", "10")),
        ("B", ("41.0", "30")),
        ("C", ("77.3", "52")),
    ]
    rows = children(nodes, para)
    assert rows[0].text.startswith("Table 2: Device energy")
    assert (
        rows[2].text
        == "Table 2 (Device energy per training run, metered at the wall.) · B · Energy (kWh): 41.0 · Hours: 30"
    )
    assert under(energy_pdf, rows[0].rects[0]).startswith("Table 2: Device energy")
    assert under(energy_pdf, rows[2].rects[0]) == "B 41.0 30"
    b = table.rows[1]
    assert under(energy_pdf, (1, *b.cell_boxes[0])) == "41.0" and under(energy_pdf, (1, *b.cell_boxes[1])) == "30"
    assert under(energy_pdf, (1, *table.header_boxes[0])) == "Energy (kWh)"
    painted = cell_rects(para, rows, [para], "41.0")
    assert [under(energy_pdf, r) for r in painted] == [
        "Table 2: Device energy per training run, metered at the wall.",
        "B",
        "41.0",
        "Energy (kWh)",
    ]
    assert [under(energy_pdf, r) for r in cell_rects(para, rows, [para], "999")][1:] == [
        "A 12.5 10",
        "B 41.0 30",
        "C 77.3 52",
    ]
    assert record_quote(table, "41.0") == (
        "Table 2: Device energy per training run, metered at the wall.\nB · Energy (kWh): 41.0 · Hours: 30"
    )


def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).astype(int)


def test_the_page_highlights_the_cell_its_row_label_and_its_column_header(energy_pdf: Path, tmp_path: Path) -> None:
    """The page highlights the cited cell, its row label and its column header (not the whole
    row); the text view and the citation name the cell."""
    import httpx

    lake = tmp_path / "lake"
    assert not kr.index(energy_pdf.parent, lake, index_config=RECORDS, progress=lambda _m: None).failed
    nodes = read_tree(Lake(lake), "energy")
    para = table_paragraph(nodes)
    assert para.table is not None
    base = "/api/documents/energy"
    with serving(build_app(ServeSettings(lake=lake))) as url:
        plain = pixels(httpx.get(f"{url}{base}/pages/1.png", timeout=30).content)
        marked = pixels(httpx.get(f"{url}{base}/pages/1.png?highlight={para.node_id}&value=41.0", timeout=30).content)
        text = httpx.get(f"{url}{base}/text?highlight={para.node_id}&value=41.0", timeout=30).json()
    changed = np.abs(plain - marked).sum(axis=2) > 0
    scale = plain.shape[1] / 612

    def painted(box) -> bool:  # noqa: ANN001
        x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        return bool(changed[int(y * scale), int(x * scale)])

    table = para.table
    b, a, c = table.rows[1], table.rows[0], table.rows[2]
    assert painted(b.cell_boxes[0]) and painted(table.header_boxes[0])
    assert painted((b.bbox[0] + 1, b.bbox[1], b.bbox[0] + 4, b.bbox[3]))  # the row's label "B"
    assert not painted(b.cell_boxes[1]) and not painted(a.cell_boxes[0]) and not painted(c.cell_boxes[0])
    assert not painted(table.header_boxes[1])
    marks = [p["text"].strip() for p in text["parts"] if p["marked"]]
    assert marks == [
        "Table 2: Device energy per training run, metered at the wall.",
        "B · Energy (kWh): 41.0 · Hours: 30",
    ]
    assert text["cell"] == {"table": "Table 2", "row": "B", "column": "Energy (kWh)"}


ENERGY_QUESTION = "How much device energy did run B use?"


@pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")
def test_the_answer_card_names_the_cell_and_the_page_marks_it(
    energy_pdf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer card names the cell the value came from, and the page marks that cell, not
    the whole row. Set KOHAKU_SCREENSHOTS to a folder to keep the screenshots
    (docs/images/table_cell_*.png come from this test)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.support import qa_server

    lake = tmp_path / "lake"
    assert not kr.index(energy_pdf.parent, lake, index_config=RECORDS, progress=lambda _m: None).failed
    monkeypatch.setitem(qa_server.QUESTIONS, ENERGY_QUESTION, ("kWh", "41.0", "energy"))
    shots = os.environ.get("KOHAKU_SCREENSHOTS")
    with qa_server.QAServer() as qa, serving(build_app(ServeSettings(lake=lake))) as url, chromium() as driver:
        write_config(lake, "fake", qa.base_url)
        wait = WebDriverWait(driver, 30)
        driver.get(url + "/")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#config option[value=fake]"))
        driver.find_element(By.ID, "config").send_keys("fake")
        driver.find_element(By.ID, "question").send_keys(ENERGY_QUESTION)
        driver.find_element(By.ID, "unit").send_keys("kWh")
        driver.find_element(By.ID, "ask").click()
        try:
            wait.until(ec.visibility_of_element_located((By.ID, "answer")))
        except Exception:
            raise AssertionError((driver.find_element(By.ID, "error").text, driver.get_log("browser"))) from None
        assert driver.find_element(By.ID, "value").text == "41"  # the value as normalised
        # One value, once: the reply's words "41.0 kWh" are the same value in another spelling.
        assert driver.find_element(By.ID, "answer-text").text == ""
        assert driver.find_element(By.ID, "cell").text == "Table 2, row B, column Energy (kWh)"
        driver.find_element(By.CSS_SELECTOR, "#chips .chip").click()
        wait.until(lambda d: d.execute_script("return document.getElementById('page').naturalWidth") > 0)
        marks = [m.text.strip() for m in driver.find_elements(By.CSS_SELECTOR, "#evidence-text mark")]
        assert "B · Energy (kWh): 41.0 · Hours: 30" in marks
        assert "Table 2, row B, column Energy (kWh)" in driver.find_element(By.ID, "evidence-title").text
        if shots:
            driver.save_screenshot(str(Path(shots) / "table_cell_card.png"))
            driver.find_element(By.ID, "page").screenshot(str(Path(shots) / "table_cell_page.png"))


TOGETHER_QUESTION = "How much device energy did runs B and C use together, in MWh?"


@pytest.mark.skipif(chromium_missing() is not None, reason=chromium_missing() or "")
def test_a_value_computed_from_named_cells_names_both_and_the_page_marks_the_cell(
    energy_pdf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sum over two cells in another unit (41.0 + 77.3 kWh = 0.1183 MWh) is computed by the
    code from the cells the reply names, not by the model, and the card names both cells
    though no cell states the sum. With `table_cells = "named"` the model names the two
    cells, the code adds them and converts kWh to MWh; the card names both cells and the page
    marks both, with their row labels and header. KOHAKU_SCREENSHOTS keeps the screenshots
    (docs/images/table_cells_named_*.png)."""
    import base64
    import json

    import httpx
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.support import qa_server

    lake = tmp_path / "lake"
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "energy.pdf").write_bytes(energy_pdf.read_bytes())
    (corpus / "metadata.csv").write_text(
        "id,type,title,year,citation,url\nenergy,paper,Energy report,2025,,https://example.org/energy-report.pdf\n"
    )
    assert not kr.index(corpus, lake, index_config=RECORDS, progress=lambda _m: None).failed
    # The scripted model types a wrong sum; the cells it names are what count.
    monkeypatch.setitem(qa_server.QUESTIONS, TOGETHER_QUESTION, ("MWh", "0.2", "energy"))
    cells = [{"row": "Table 2: B", "column": "Energy (kWh)"}, {"row": "Table 2: C", "column": "Energy (kWh)"}]
    monkeypatch.setitem(qa_server.CELLS, TOGETHER_QUESTION, (cells, "a + b"))
    alone = "How much device energy did run A use, in MWh?"
    monkeypatch.setitem(qa_server.FOLLOW_UPS, "And run A alone?", alone)
    monkeypatch.setitem(qa_server.QUESTIONS, alone, ("MWh", "0.0125", "energy"))
    shots = os.environ.get("KOHAKU_SCREENSHOTS")
    with qa_server.QAServer() as qa, serving(build_app(ServeSettings(lake=lake))) as url, chromium() as driver:
        write_config(lake, "cells", qa.base_url)
        config = json.loads((lake / "configs" / "cells.json").read_text())
        config["generation"]["table_cells"] = "named"
        (lake / "configs" / "cells.json").write_text(json.dumps(config))
        wait = WebDriverWait(driver, 30)
        driver.get(url + "/")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#config option[value=cells]"))
        driver.find_element(By.ID, "config").send_keys("cells")
        driver.find_element(By.ID, "question").send_keys(TOGETHER_QUESTION)
        driver.find_element(By.ID, "unit").send_keys("MWh")
        driver.find_element(By.ID, "ask").click()
        try:
            wait.until(ec.visibility_of_element_located((By.ID, "answer")))
        except Exception:
            raise AssertionError((driver.find_element(By.ID, "error").text, driver.get_log("browser"))) from None
        assert driver.find_element(By.ID, "value").text == "0.1183"
        named = "Table 2, row B, column Energy (kWh); Table 2, row C, column Energy (kWh)"
        assert driver.find_element(By.ID, "cell").text == named
        driver.find_element(By.CSS_SELECTOR, "#chips .chip").click()
        wait.until(lambda d: d.execute_script("return document.getElementById('page').naturalWidth") > 0)
        marks = [m.text.strip() for m in driver.find_elements(By.CSS_SELECTOR, "#evidence-text mark")]
        assert "B · Energy (kWh): 41.0 · Hours: 30" in marks and "C · Energy (kWh): 77.3 · Hours: 52" in marks
        assert "A · Energy (kWh): 12.5 · Hours: 10" not in marks
        assert named in driver.find_element(By.ID, "evidence-title").text
        page = driver.execute_script(
            "const i = document.getElementById('page'); const c = document.createElement('canvas');"
            "c.width = i.naturalWidth; c.height = i.naturalHeight; c.getContext('2d').drawImage(i, 0, 0);"
            "return c.toDataURL('image/png');"
        )
        plain = pixels(httpx.get(f"{url}/api/documents/energy/pages/1.png", timeout=30).content)
        if shots:
            driver.save_screenshot(str(Path(shots) / "table_cells_named_card.png"))
            driver.find_element(By.ID, "page").screenshot(str(Path(shots) / "table_cells_named_page.png"))
        # On a phone the source link beside the long title stays one word on one line.
        driver.set_window_size(390, 844)
        link = driver.find_element(By.ID, "evidence-link")
        assert link.text == "source"
        if link.text:
            assert link.size["height"] < 2 * float(link.value_of_css_property("font-size").rstrip("px")), link.size
        title = driver.find_element(By.ID, "evidence-title")
        assert title.size["width"] > 150, title.size  # the title wraps as words, not letters
        if shots:
            driver.save_screenshot(str(Path(shots) / "table_cells_named_phone.png"))
        # A follow-up's rewrite reads the cells' row names ("and run A?" after runs B and C).
        driver.find_element(By.ID, "follow-up").click()
        driver.find_element(By.ID, "question").send_keys("And run A alone?")
        driver.find_element(By.ID, "ask").click()
        wait.until(lambda d: any("Conversation so far" in str(r.body) for r in qa.requests))
        rewrite = next(r.body for r in qa.requests if "Conversation so far" in str(r.body))
        assert f"0.1183 MWh ({named})" in rewrite["messages"][-1]["content"]
    # The page image the browser shows marks B's energy cell, not C's, not B's hours.
    shown = pixels(base64.b64decode(page.split(",", 1)[1]))
    assert shown.shape == plain.shape
    table = table_paragraph(read_tree(Lake(lake), "energy")).table
    assert table is not None
    scale = shown.shape[1] / 612
    changed = np.abs(shown - plain).sum(axis=2) > 30

    def painted(box) -> bool:  # noqa: ANN001
        x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        return bool(changed[int(y * scale), int(x * scale)])

    assert painted(table.rows[1].cell_boxes[0]) and painted(table.rows[2].cell_boxes[0])  # B's and C's energy
    assert not painted(table.rows[1].cell_boxes[1]) and not painted(table.rows[0].cell_boxes[0])  # B's hours, A's
