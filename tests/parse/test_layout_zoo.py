"""Headings, running text and hyphenation on publisher-like layouts (kohaku_rag.samples.layout_zoo)."""

import re
from pathlib import Path

import pymupdf
import pytest

from kohaku_rag.document.tree import ParsedDocument
from kohaku_rag.parse.pdf import parse_pdf
from kohaku_rag.parse.pdf_layout import Line, merge_lines_text, vocabulary_of
from kohaku_rag.samples.layout_zoo import NBSP, STYLES, running_texts, write_zoo


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[str]]]:
    folder = tmp_path_factory.mktemp("zoo")
    out = {}
    for outline in (False, True):
        for name, (path, headings) in write_zoo(folder, outline=outline).items():
            out[f"{name}{'+outline' if outline else ''}"] = (path, [h.text for h in headings])
    return out


def _body(doc: ParsedDocument) -> str:
    return " ".join(p.text for s in doc.sections for p in s.paragraphs)


@pytest.mark.parametrize("name", ["springer", "ieee", "report"])
@pytest.mark.parametrize("outline", [False, True])
def test_every_heading_found_and_nothing_else(zoo, name: str, outline: bool) -> None:
    path, headings = zoo[f"{name}{'+outline' if outline else ''}"]
    doc = parse_pdf(path, name)
    titles = [s.title for s in doc.sections]
    assert [_norm(t) for t in titles[1:]] == [_norm(h) for h in headings]  # in order, no extra section
    assert titles[0] == "Abstract"
    assert doc.metadata["sections_source"] == ("outline" if outline else "layout")
    assert NBSP not in "".join(titles)


@pytest.mark.parametrize("name", ["springer", "ieee", "report"])
def test_running_headers_and_footers_stay_out_of_the_body(zoo, name: str) -> None:
    path, _ = zoo[name]
    body = _body(parse_pdf(path, name))
    for text in running_texts(STYLES[name]):
        assert text not in body


def test_unnumbered_sans_headings_at_1_1x_a_serif_body(zoo) -> None:
    """The Springer-like case: bold sans at 10.5 pt beside a 9.5 pt serif, unnumbered,
    one wrapped over two lines with non-breaking spaces; the author block is no heading."""
    path, headings = zoo["springer"]
    doc = parse_pdf(path, "springer")
    wrapped = "Energy measurement methodology for large model training clusters"
    assert wrapped in [s.title for s in doc.sections]
    assert not any("Author" in s.title for s in doc.sections)


def test_compounds_keep_their_hyphen_and_broken_words_join(zoo) -> None:
    body = _body(parse_pdf(zoo["ieee"][0], "ieee"))
    assert "node-level" in body and "nodelevel" not in body
    assert "state-of-the-art" in body and "stateof" not in body
    assert "Energy-efficient" in body and "Energyefficient" not in body
    assert not re.search(r"[a-z]- [a-z]", body)  # no word left broken at a line end


def _line(text: str, page: int = 1) -> Line:
    return Line(page, (0.0, 0.0, 100.0, 10.0), 10.0, text, 10.0, False, 0)


def test_dehyphenation_is_judged_by_the_documents_own_words() -> None:
    vocabulary = vocabulary_of([_line("the node count and the level of detail"), _line("a methodol-"), _line("ogy")])
    assert "methodol" not in vocabulary and "ogy" not in vocabulary  # halves of a broken word
    assert merge_lines_text(["per node-", "level energy"], vocabulary) == "per node-level energy"
    assert merge_lines_text(["a methodol-", "ogy"], vocabulary) == "a methodology"
    assert merge_lines_text(["per node-", "level energy"]) == "per nodelevel energy"  # no vocabulary: as before


def test_outline_entry_is_placed_on_the_heading_not_on_a_sentence_ending_alike(tmp_path: Path) -> None:
    """A body line ending with an entry's words on the same page must not take its place."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 60), "Measuring energy", fontname="hebo", fontsize=18)
    page.insert_text((72, 100), "We compared it with estimates from rated power.", fontname="tiro", fontsize=10)
    page.insert_text((72, 130), "Estimates from rated power", fontname="hebo", fontsize=12)
    for k in range(6):
        page.insert_text((72, 160 + 14 * k), f"Body sentence number {k} about energy use in data centres.",
                         fontname="tiro", fontsize=10)  # fmt: skip
    doc.set_toc([[1, "Estimates from rated power", 1]])
    path = tmp_path / "o.pdf"
    doc.save(path)
    parsed = parse_pdf(path, "o")
    section = next(s for s in parsed.sections if s.title == "Estimates from rated power")
    assert section.paragraphs[0].text.startswith("Body sentence number 0")


def test_references_can_be_kept_out_of_the_index(zoo, tmp_path: Path) -> None:
    import shutil

    import kohaku_rag as kr
    from kohaku_rag.indexing import steps as ix
    from kohaku_rag.lake.layout import Lake

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(zoo["springer"][0], corpus / "paper.pdf")
    lake = tmp_path / "lake"
    kr.index(corpus, lake, index_config=kr.IndexConfig(captioner="none", index_references=False), progress=print)
    titles = {n.title for n in ix.read_tree(Lake(lake), "paper") if str(n.kind) == "section"}
    assert "Conclusion" in titles and "References" not in titles
