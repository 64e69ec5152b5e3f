"""The PyMuPDF parser on real PDFs (outline ignored), on the self-generated sample
corpus, and on broken inputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kohaku_rag.document.tree import Attachment, NodeKind, ParsedDocument, ParsedParagraph, build_tree
from kohaku_rag.errors import DocumentError
from kohaku_rag.parse.pdf import parse_pdf
from kohaku_rag.parse.pdf_layout import merge_lines_text
from kohaku_rag.parse.sentences import split_sentences
from kohaku_rag.samples import SAMPLES, make_bad_pdfs, sample_headings, sample_title, write_sample_corpus
from tests.support.shared_data import PDFS

RESNET = PDFS / "he2015_resnet_1512.03385.pdf"
ATTENTION = PDFS / "vaswani2017_attention_1706.03762.pdf"
SLIDES = PDFS / "wattbot2025_attentionplease_slides.pdf"


@pytest.fixture(scope="module")
def resnet() -> ParsedDocument:
    return parse_pdf(RESNET, "resnet")


@pytest.fixture(scope="module")
def attention() -> ParsedDocument:
    return parse_pdf(ATTENTION, "attention")


@pytest.fixture(scope="module")
def slides() -> ParsedDocument:
    return parse_pdf(SLIDES, "slides")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return write_sample_corpus(tmp_path_factory.mktemp("samples"))


@pytest.fixture(scope="module")
def parsed_samples(corpus: list[Path]) -> dict[str, ParsedDocument]:
    return {path.stem: parse_pdf(path, path.stem) for path in corpus}


def titles(doc: ParsedDocument) -> list[str]:
    return [s.title for s in doc.sections]


def paragraphs(doc: ParsedDocument, kind: Attachment | None = None) -> list[ParsedParagraph]:
    return [p for s in doc.sections for p in s.paragraphs if kind is None or p.attachment is kind]


def section(doc: ParsedDocument, title: str):
    return next(s for s in doc.sections if s.title == title)


def assert_in_order(found: list[str], expected: list[str]) -> None:
    positions = [found.index(t) for t in expected]  # ValueError names a missing heading
    assert positions == sorted(positions), found


# ---------------------------------------------------------------- sections


def test_resnet_headings_from_layout(resnet: ParsedDocument) -> None:
    found = titles(resnet)
    assert found[0] == "Abstract"
    assert_in_order(
        found,
        [
            "1. Introduction",
            "2. Related Work",
            "3. Deep Residual Learning",
            "3.1. Residual Learning",
            "3.2. Identity Mapping by Shortcuts",
            "3.3. Network Architectures",
            "3.4. Implementation",
            "4. Experiments",
            "4.1. ImageNet Classification",
            "4.2. CIFAR-10 and Analysis",
            "4.3. Object Detection on PASCAL and MS COCO",
            "References",
            "A. Object Detection Baselines",
            "B. Object Detection Improvements",
            "C. ImageNet Localization",
        ],
    )
    # run-in paragraph heads and table cells are not sections
    assert not any(t.startswith(("Residual Representations", "Plain Networks", "25.03")) for t in found)
    assert section(resnet, "3.2. Identity Mapping by Shortcuts").page == 3


def test_attention_headings_and_front_matter(attention: ParsedDocument) -> None:
    found = titles(attention)
    assert attention.title == "Attention Is All You Need"
    assert found[0] == "Abstract"
    assert_in_order(
        found,
        [
            "1 Introduction",
            "2 Background",
            "3 Model Architecture",
            "3.1 Encoder and Decoder Stacks",
            "3.2 Attention",
            "3.2.1 Scaled Dot-Product Attention",
            "3.2.2 Multi-Head Attention",
            "3.5 Positional Encoding",
            "4 Why Self-Attention",
            "5 Training",
            "5.4 Regularization",
            "6 Results",
            "6.3 English Constituency Parsing",
            "7 Conclusion",
            "References",
        ],
    )
    front = " ".join(p.text for p in attention.sections[0].paragraphs)
    assert front.startswith("Attention Is All You Need")
    assert "The dominant sequence transduction models" in front
    assert "Recurrent neural networks" not in front


# ---------------------------------------------------------------- reading order, cleaning


def test_resnet_two_column_reading_order(resnet: ParsedDocument) -> None:
    abstract = " ".join(p.text for p in section(resnet, "Abstract").paragraphs)
    assert "Deeper neural networks are more difficult to train." in abstract
    intro = section(resnet, "1. Introduction").paragraphs
    # the left column of page 1 ends mid-sentence; the right column (after Figure 1) finishes it
    assert "recognition tasks [8, 12, 7, 32, 27] have also greatly benefited from very deep models." in intro[0].text
    texts = [p.text for p in intro if p.attachment is Attachment.TEXT]
    driven = next(i for i, t in enumerate(texts) if t.startswith("Driven by the significance of depth"))
    degradation = next(i for i, t in enumerate(texts) if t.startswith("When deeper networks are able to start"))
    assert driven < degradation
    # page 1's right column continues at the top of page 2's left column
    assert "unable to find solutions that are comparably good or better than the constructed solution" in " ".join(
        texts
    )


def test_no_running_headers_page_numbers_or_stamps(resnet, attention, slides) -> None:
    for doc in (resnet, attention, slides):
        for p in paragraphs(doc, Attachment.TEXT):
            assert not re.fullmatch(r"\d{1,3}( / \d+)?", p.text), (doc.doc_id, p.text)
            assert "[cs.CV]" not in p.text and "[cs.CL]" not in p.text, p.text
            assert not re.search(r"arXiv:1512\.03385v1|arXiv:1706\.03762v5", p.text), p.text
    attention_text = " ".join(p.text for p in paragraphs(attention))
    assert "Conference on Neural Information Processing Systems" not in attention_text  # first-page venue footer
    slide_text = " ".join(p.text for p in paragraphs(slides))
    assert "Kaggle Competition: WattBot 2025" not in slide_text
    assert "Team name: Attention Please" in slide_text  # the title slide's own line stays


def test_hyphenation_repaired_and_ligatures_expanded(resnet: ParsedDocument) -> None:
    abstract = " ".join(p.text for p in section(resnet, "Abstract").paragraphs)
    # printed as "learn-" / "ing", "com-" / "prehensive" and "difﬁcult" (fi ligature)
    assert "reformulate the layers as learning residual functions" in abstract
    assert "We provide comprehensive empirical evidence" in abstract
    assert "more difficult to train" in abstract
    everything = " ".join(p.text for p in paragraphs(resnet))
    assert "com- prehensive" not in everything and "ﬁ" not in everything
    assert "Our 152-layer residual net" in everything  # a real hyphen before a digit-led word stays


def test_merge_lines_rules() -> None:
    assert merge_lines_text(["a new methodol-", "ogy for"]) == "a new methodology for"
    assert merge_lines_text(["the ResNet-", "50 model"]) == "the ResNet-50 model"
    assert merge_lines_text(["see https://github.com/", "tensorflow/t2t"]) == "see https://github.com/tensorflow/t2t"
    assert merge_lines_text(["ends here -", "and then"]) == "ends here - and then"


def test_footnotes_do_not_split_paragraphs(resnet: ParsedDocument) -> None:
    texts = [p.text for p in paragraphs(resnet, Attachment.TEXT)]
    # "... the 34-layer" (foot of page 5, above footnote 3) + "ResNet reduces ..." (page 6)
    assert any(
        "Second, compared to its plain counterpart, the 34-layer ResNet reduces the top-1 error" in t for t in texts
    )
    assert any(t.startswith("3We have experimented with more training iterations") for t in texts)


def test_references_are_one_paragraph_each(attention: ParsedDocument) -> None:
    refs = [p.text for p in section(attention, "References").paragraphs]
    assert refs[0].startswith("[1] Jimmy Lei Ba") and refs[0].endswith("arXiv:1607.06450, 2016.")
    assert refs[1].startswith("[2] Dzmitry Bahdanau")
    assert len(refs) == 40


# ---------------------------------------------------------------- tables


def test_resnet_tables_keep_rows_columns_and_numbers(resnet: ParsedDocument) -> None:
    tables = paragraphs(resnet, Attachment.TABLE)
    t1 = next(t for t in tables if t.text.startswith("Table 1. Architectures for ImageNet"))
    rows = t1.text.splitlines()
    assert rows[1] == "layer name | output size | 18-layer | 34-layer | 50-layer | 101-layer | 152-layer"
    assert "FLOPs |  | 1.8×10^9 | 3.6×10^9 | 3.8×10^9 | 7.6×10^9 | 11.3×10^9" in rows
    assert t1.page == 5
    t2 = next(t for t in tables if t.text.startswith("Table 2. Top-1 error"))
    assert t2.text.splitlines()[1:] == [" | plain | ResNet", "18 layers | 27.94 | 27.88", "34 layers | 28.54 | 25.03"]
    running = " ".join(p.text for p in paragraphs(resnet, Attachment.TEXT))
    assert "27.94" not in running and "28.54 | 25.03" not in running
    assert "Table 2. Top-1 error" not in running  # the caption lives with the table


def test_attention_table_3(attention: ParsedDocument) -> None:
    t3 = next(t for t in paragraphs(attention, Attachment.TABLE) if t.text.startswith("Table 3: Variations"))
    rows = t3.text.splitlines()
    assert "base | 6 512 2048 8 64 64 0.1 0.1 100K | 4.92 25.8 65" in rows
    assert "big | 6 1024 4096 16 0.3 300K | 4.33 26.4 213" in rows
    t2 = next(t for t in paragraphs(attention, Attachment.TABLE) if t.text.startswith("Table 2:"))
    assert "Transformer (big) | 28.4 | 41.8 | 2.3 · 10^19" in t2.text.splitlines()


def test_tables_become_single_sentence_nodes(resnet: ParsedDocument) -> None:
    nodes = build_tree(resnet, split_sentences)
    table_nodes = [n for n in nodes if n.attachment is Attachment.TABLE]
    assert {n.kind for n in table_nodes} == {NodeKind.PARAGRAPH, NodeKind.SENTENCE}
    assert all(n.bbox is not None for n in table_nodes if n.kind is NodeKind.PARAGRAPH)


# ---------------------------------------------------------------- slides


def test_slide_deck_one_section_per_slide(slides: ParsedDocument) -> None:
    assert slides.metadata["layout"] == "slides"
    assert [s.page for s in slides.sections] == list(range(1, 29))
    found = titles(slides)
    assert found[0] == "114-1 TAICA Natural Language Processing: Term Project"
    assert found[1] == "Outline"
    assert found[2] == "Section 1: Competition Overview"
    assert found[27] == "[Action Required] Self-Assessment and Scoring Alignment"
    perf = slides.sections[15]
    assert perf.title == "Section 5: Our Baseline Method — Retrieval Performance Analysis"
    table = next(p for p in perf.paragraphs if p.attachment is Attachment.TABLE)
    assert "Hybrid (Noise) | 79.49% | 89.74% | 92.31% | 92.31% | 0.8526" in table.text.splitlines()


# ---------------------------------------------------------------- sample corpus


def test_sample_corpus_round_trip(corpus: list[Path], parsed_samples: dict[str, ParsedDocument]) -> None:
    assert [p.stem for p in corpus] == [s.doc_id for s in SAMPLES]
    meta = (corpus[0].parent / "metadata.csv").read_text().splitlines()
    assert meta[0] == "id,type,title,year,citation,url" and len(meta) == 4
    for doc_id, doc in parsed_samples.items():
        assert doc.title == sample_title(doc_id)
        assert_in_order(titles(doc), sample_headings(doc_id))
        text = [p.text for p in paragraphs(doc, Attachment.TEXT)]
        assert not any(t.startswith("kohaku-lake sample corpus |") or t.isdigit() for t in text)
        tables = paragraphs(doc, Attachment.TABLE)
        assert tables and all(t.text.startswith("Table ") for t in tables)
        figures = paragraphs(doc, Attachment.IMAGE)
        assert [f.text[:9] for f in figures] == ["Figure 1:"]
        assert figures[0].image is not None and figures[0].image.startswith(b"\x89PNG")
        assert not any(t.startswith("Figure 1:") for t in text)  # the caption is not repeated


def test_sample_corpus_numbers_and_columns(parsed_samples: dict[str, ParsedDocument]) -> None:
    gpu = parsed_samples["sample_gpu_energy"]
    t1 = next(t for t in paragraphs(gpu, Attachment.TABLE) if t.text.startswith("Table 1:"))
    assert "B | A100 80GB | 64 | 310 | 96 | 1904.6" in t1.text.splitlines()
    carbon = parsed_samples["sample_datacenter_carbon"]
    t = next(t for t in paragraphs(carbon, Attachment.TABLE))
    assert t.text.splitlines()[1] == "Region | Intensity (gCO2e/kWh) | Facility energy (kWh) | Emissions (kg CO2e)"
    assert "Coal | 800 | 11500 | 9200.0" in t.text
    # two columns: section 2.1 continues from the foot of the left column into the right one
    power = " ".join(p.text for p in section(carbon, "2.1 Power usage effectiveness").paragraphs)
    assert "A facility with a PUE of 1.5 spends half a kilowatt-hour on overhead for every kilowatt-hour" in power


def test_sample_corpus_is_deterministic(corpus: list[Path], tmp_path: Path) -> None:
    again = write_sample_corpus(tmp_path)
    assert [p.read_bytes() for p in again] == [p.read_bytes() for p in corpus]


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kind", "reason"),
    [("corrupt", "corrupt"), ("encrypted", "password"), ("empty", "empty"), ("image_only", "OCR")],
)
def test_bad_pdfs_raise_document_error(tmp_path: Path, kind: str, reason: str) -> None:
    path = make_bad_pdfs(tmp_path)[kind]
    with pytest.raises(DocumentError) as info:
        parse_pdf(path, kind)
    assert path.name in str(info.value) and reason in str(info.value)


def test_missing_and_non_pdf_files(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="not found"):
        parse_pdf(tmp_path / "absent.pdf", "absent")
    html = tmp_path / "page.pdf"
    html.write_text("<html><body>not a pdf</body></html>")
    with pytest.raises(DocumentError, match="page.pdf: corrupt"):
        parse_pdf(html, "page")
