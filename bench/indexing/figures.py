"""Figures and tables on the shared PDFs, and what caption and table nodes do for retrieval.

    python bench/indexing/figures.py [--pdfs ../shared/pdfs] [--work /tmp/kohaku-figures]

Prints, per PDF: figures (raster/vector) and tables found, seconds per figure for
extraction and for OCR; then, for questions whose answer is visible only in a figure or a
table, the rank of that node in `kohaku search` with caption and table nodes (default
index) and without them (text-only index), both built in this run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

import pymupdf

from kohaku_assets.resources import KohakuSettings
from kohaku_assets.runner import run_index
from kohaku_rag.document.tree import Attachment
from kohaku_rag.indexing.captions import OcrCaptioner
from kohaku_rag.parse.pdf import parse_pdf
from kohaku_rag.parse.pdf_figures import find_figures
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig
from kohaku_rag.retrieval.retriever import open_retriever

REPO = Path(__file__).resolve().parents[2]
PDFS = {
    "resnet": "he2015_resnet_1512.03385.pdf",
    "attention": "vaswani2017_attention_1706.03762.pdf",
    "slides": "wattbot2025_attentionplease_slides.pdf",
}


@dataclass(frozen=True)
class VisualQuery:
    question: str
    doc_id: str
    page: int
    attachment: str  # "table" or "image"
    answer: str  # a string of the answer that the node must contain


# Written from the PDFs: each answer is printed only inside a table or drawn in a figure.
QUERIES = [
    VisualQuery("Top-1 error of plain-34 with 10-crop testing on ImageNet validation", "resnet", 5, "table", "28.54"),
    VisualQuery("How many FLOPs does the 152-layer ImageNet architecture need?", "resnet", 5, "table", "11.3"),
    VisualQuery("Classification error of ResNet-110 on the CIFAR-10 test set", "resnet", 7, "table", "6.43"),
    VisualQuery("mAP of ResNet-101 for object detection on the COCO validation set", "resnet", 8, "table", "27.2"),
    VisualQuery(
        "CIFAR-10 training error of the 56-layer plain network plotted against iterations", "resnet", 1, "image", "iter"
    ),
    VisualQuery(
        "Training cost in FLOPs of the base Transformer model on English-to-German", "attention", 8, "table", "3.3"
    ),
    VisualQuery(
        "F1 of the 4-layer Transformer semi-supervised on WSJ section 23 parsing", "attention", 9, "table", "92.7"
    ),
    VisualQuery(
        "Which block follows each attention layer in the Transformer architecture diagram?",
        "attention",
        3,
        "image",
        "Add & Norm",
    ),
    VisualQuery(
        "Which optional step sits between Scale and SoftMax in scaled dot-product attention?",
        "attention",
        4,
        "image",
        "Mask (opt.)",
    ),
    VisualQuery("Recall@1 of the Hybrid (Noise) retrieval pipeline", "slides", 16, "table", "79.49"),
]


def extraction_stats(pdf: Path) -> tuple[int, int, int, float, float, list[bytes]]:
    """What the parser indexes (figure and table nodes of the parsed document), the whole
    parse's seconds, and the figure search's own seconds (tables excluded)."""
    started = time.perf_counter()
    parsed = parse_pdf(pdf, pdf.stem)
    parse_seconds = time.perf_counter() - started
    paragraphs = [p for s in parsed.sections for p in s.paragraphs]
    tables = sum(p.attachment is Attachment.TABLE for p in paragraphs)
    images = [p.image for p in paragraphs if p.attachment is Attachment.IMAGE and p.image]
    raster = vector = 0
    started = time.perf_counter()
    with pymupdf.open(pdf) as doc:
        for page in doc:
            for fig in find_figures(page, tables=[]):
                raster += fig.source == "raster"
                vector += fig.source == "vector"
    return raster, vector, tables, parse_seconds, time.perf_counter() - started, images


def _blank_png() -> bytes:
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 32, 32), False)
    pix.clear_with(255)
    return pix.tobytes("png")


def build(work: Path, corpus: Path, name: str, config: dict) -> KohakuSettings:
    lake = work / name
    shutil.rmtree(lake, ignore_errors=True)
    cfg_file = work / f"{name}.json"
    cfg_file.write_text(json.dumps(config))
    settings = KohakuSettings(lake_root=str(lake), corpus_dir=str(corpus), index_config_file=str(cfg_file))
    report = run_index(settings, progress=lambda _m: None)
    if report.failed:
        raise SystemExit(f"{name}: indexing failed: {report.failed}")
    return settings


def rank_of(settings: KohakuSettings, q: VisualQuery, media: bool) -> str:
    retriever = open_retriever(settings.lake, settings.index_config())
    items = retriever.search([q.question], replace(RetrievalConfig(), top_k_final=50, budget_chars=10**9))
    for rank, item in enumerate(items, start=1):
        on_page = item.doc_id == q.doc_id and item.page == q.page and q.answer.lower() in item.text.lower()
        if on_page and (not media or item.attachment == q.attachment):
            return str(rank)
    return "-"


def in_body_text(settings: KohakuSettings, q: VisualQuery) -> bool:
    """Whether the answer is also printed in the running text of its page (the text-only
    index): then the query does not need the table or figure."""
    import pyarrow.parquet as pq

    rows = pq.read_table(
        settings.lake.table("document_tree", q.doc_id), columns=["page", "text", "attachment"]
    ).to_pylist()
    return any(
        r["page"] == q.page and r["attachment"] == "text" and q.answer.lower() in (r["text"] or "").lower()
        for r in rows
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pdfs", type=Path, default=REPO.parent / "shared" / "pdfs")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kohaku-figures"))
    args = parser.parse_args()
    work: Path = args.work
    corpus = work / "corpus"
    shutil.rmtree(corpus, ignore_errors=True)
    corpus.mkdir(parents=True)
    ocr = OcrCaptioner()
    ocr.read_lines(_blank_png())  # load the OCR models before timing
    print(
        f"{'document':<10} {'pages':>5} {'figures':>7} {'(raster':>7} {'vector)':>7} {'tables':>6} "
        f"{'parse s':>7} {'find s/fig':>10} {'OCR s/fig':>9} {'OCR chars/fig':>13}"
    )
    for doc_id, name in PDFS.items():
        shutil.copyfile(args.pdfs / name, corpus / f"{doc_id}.pdf")
        raster, vector, tables, parse_s, find_s, images = extraction_stats(args.pdfs / name)
        started = time.perf_counter()
        chars = sum(len(" ".join(ocr.read_lines(image))) for image in images)
        ocr_s = (time.perf_counter() - started) / max(len(images), 1)
        with pymupdf.open(args.pdfs / name) as doc:
            pages = doc.page_count
        print(
            f"{doc_id:<10} {pages:>5} {len(images):>7} {raster:>7} {vector:>7} {tables:>6} {parse_s:>7.1f} "
            f"{find_s / max(raster + vector, 1):>10.2f} {ocr_s:>9.2f} {chars / max(len(images), 1):>13.0f}"
        )
    print(
        "(figures and tables: the nodes the parser indexes; raster/vector: the figure finder alone, "
        "tables not excluded; parse s: the whole PDF, layout, tables and figures)"
    )
    with_media = build(work, corpus, "with_media", {"captioner": "ocr"})
    text_only = build(work, corpus, "text_only", {"captioner": "none", "media_nodes": False})
    print(f"\n{'query':<70} {'with':>5} {'without':>8} {'answer in body text':>20}")
    for q in QUERIES:
        print(
            f"{q.question[:70]:<70} {rank_of(with_media, q, True):>5} {rank_of(text_only, q, False):>8} "
            f"{'yes' if in_body_text(text_only, q) else 'no':>20}"
        )
    print(
        "(rank of the node holding the answer: the table/figure node with caption and table nodes, "
        "any node on that page containing the answer without them; '-' = not in the top 50)"
    )


if __name__ == "__main__":
    main()
