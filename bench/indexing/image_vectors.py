"""Image vectors (jina-embeddings-v4) on the shared PDFs: what they cost per document, and
the figure questions of bench/indexing/figures.py with and without them.

    python bench/indexing/image_vectors.py [--pdfs ../shared/pdfs] [--work /tmp/kohaku-image-vectors] [--dim 1024]

Everything runs against the fake Jina server of the tests (tests/support/embedding_server.py)
on 127.0.0.1, so no key and no network are needed. Printed per document: the requests,
request bytes and client seconds (data URLs, JSON, local HTTP: not Jina's own latency) of
the figures' image vectors, of the `page_images` option, and of the text vectors for scale.
Then, for the figure questions of bench/indexing/figures.py, the rank of the figure node with caption
vectors, with image vectors (figures competing with text), and in the separate image search
(`figure_search = "separate"`). The fake server's vectors are random: those ranks show the
path working end to end, NOT how well Jina v4 finds figures (the paper's numbers are in the
README).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # runs from a checkout, uninstalled

from bench.indexing.figures import PDFS, QUERIES, VisualQuery  # noqa: E402
from kohaku_rag.embed import EmbedderSpec, make_embedder  # noqa: E402
from kohaku_rag.embed.base import image_embedder  # noqa: E402
from kohaku_rag.indexing import steps as ix  # noqa: E402
from kohaku_rag.indexing.figure_vectors import figure_vectors  # noqa: E402
from kohaku_rag.indexing.index_config import IndexConfig  # noqa: E402
from kohaku_rag.indexing.pipeline import index_corpus  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402
from kohaku_rag.model_pool import ModelPool  # noqa: E402
from kohaku_rag.parse.pdf_pages import render_pages  # noqa: E402
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig  # noqa: E402
from kohaku_rag.retrieval.retriever import Retriever, open_retriever  # noqa: E402
from tests.support.embedding_server import EmbeddingServer  # noqa: E402

KEY_ENV = "KOHAKU_BENCH_JINA_KEY"


class Meter:
    """Requests and request bytes the server saw since the last reading."""

    def __init__(self, server: EmbeddingServer) -> None:
        self.server = server
        self.seen = 0

    def read(self) -> tuple[int, int]:
        new = self.server.requests[self.seen :]
        self.seen = len(self.server.requests)
        return len(new), sum(r.size for r in new)


def spec(server: EmbeddingServer, dim: int) -> EmbedderSpec:
    return EmbedderSpec(
        backend="jina", model="jina-embeddings-v4", dimensions=dim, base_url=server.base_url, api_key_env=KEY_ENV
    )


def cost_table(server: EmbeddingServer, lake: Lake, cfg: IndexConfig, corpus: Path) -> None:
    """Per document: image vectors of its figures and pages, and its text vectors, each with
    an uncached embedder (what a first index run sends)."""
    meter = Meter(server)
    print(
        f"{'document':<10} {'pages':>5} {'figures':>7} | {'figure req':>10} {'MB':>6} {'s':>5} | "
        f"{'page req':>8} {'MB':>6} {'s':>5} | {'text req':>8} {'MB':>6} {'s':>5}"
    )
    totals = [0.0] * 9
    for doc_id in PDFS:
        embedder = make_embedder(cfg.embedder)  # no cache: every vector is requested
        images = image_embedder(embedder)
        assert images is not None
        nodes = ix.indexed_tree(lake, doc_id, cfg)
        meter.read()
        started = time.perf_counter()
        figures = figure_vectors(nodes, embedder, lambda h: lake.blob(h).read_bytes(), "image", {})
        fig_s = time.perf_counter() - started
        fig_req, fig_bytes = meter.read()
        assert not figures.errors, figures.errors
        started = time.perf_counter()
        pages = render_pages(corpus / f"{doc_id}.pdf")
        images.embed_images([png for _, png in pages])
        page_s = time.perf_counter() - started
        page_req, page_bytes = meter.read()
        started = time.perf_counter()
        ix.embed_leaves(nodes, embedder, cfg)
        text_s = time.perf_counter() - started
        text_req, text_bytes = meter.read()
        row = [fig_req, fig_bytes / 1e6, fig_s, page_req, page_bytes / 1e6, page_s, text_req, text_bytes / 1e6, text_s]
        totals = [t + r for t, r in zip(totals, row, strict=True)]
        print(
            f"{doc_id:<10} {len(pages):>5} {figures.figures:>7} | {fig_req:>10} {fig_bytes / 1e6:>6.2f} {fig_s:>5.2f} | "
            f"{page_req:>8} {page_bytes / 1e6:>6.2f} {page_s:>5.2f} | {text_req:>8} {text_bytes / 1e6:>6.2f} {text_s:>5.2f}"
        )
    n = len(PDFS)
    mean = [t / n for t in totals]
    print(
        f"{'mean/doc':<10} {'':>5} {'':>7} | {mean[0]:>10.1f} {mean[1]:>6.2f} {mean[2]:>5.2f} | "
        f"{mean[3]:>8.1f} {mean[4]:>6.2f} {mean[5]:>5.2f} | {mean[6]:>8.1f} {mean[7]:>6.2f} {mean[8]:>5.2f}"
    )
    print(
        "(requests and bytes of POST bodies to /v1/embeddings; image batches of 4, text batches of 64; "
        "figure s includes reading the images from the lake, page s includes rendering the pages; "
        "s is client time against a local server, not Jina's latency)"
    )


def rank(retriever: Retriever, q: VisualQuery, cfg: RetrievalConfig) -> str:
    """Rank of the figure node holding the answer in the context (its place among the image
    search's figures in "separate" mode, marked with i)."""
    items = retriever.search([q.question], cfg)
    if cfg.figure_search == "separate":
        items = [i for i in items if i.attachment == "image"]
    for k, item in enumerate(items, start=1):
        on_page = item.doc_id == q.doc_id and item.page == q.page and item.attachment == "image"
        if on_page and q.answer.lower() in item.text.lower():
            return f"i{k}" if cfg.figure_search == "separate" else str(k)
    return "-"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pdfs", type=Path, default=ROOT.parent / "shared" / "pdfs")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kohaku-image-vectors"))
    parser.add_argument("--dim", type=int, default=1024)
    args = parser.parse_args()
    import os

    os.environ[KEY_ENV] = "fake-key-for-the-local-server"
    work: Path = args.work
    shutil.rmtree(work, ignore_errors=True)
    corpus = work / "corpus"
    corpus.mkdir(parents=True)
    for doc_id, name in PDFS.items():
        shutil.copyfile(args.pdfs / name, corpus / f"{doc_id}.pdf")
    server = EmbeddingServer().start()
    try:
        caption_cfg = IndexConfig(embedder=spec(server, args.dim), captioner="ocr", figure_vectors="caption")
        caption_lake = Lake(work / "caption")
        started = time.perf_counter()
        summary = index_corpus(corpus, caption_lake, caption_cfg, models=ModelPool())
        assert not summary.failed, summary.failed
        print(f"caption-vector index of {len(PDFS)} PDFs (OCR captions): {time.perf_counter() - started:.1f} s\n")
        cost_table(server, caption_lake, caption_cfg, corpus)

        # The image index: the caption lake copied (trees, OCR captions, text vectors in its
        # cache) and re-indexed with image vectors: only the embedding steps run.
        image_lake = Lake(work / "image")
        shutil.copytree(caption_lake.root, image_lake.root)
        image_cfg = replace(caption_cfg, figure_vectors="image")
        meter = Meter(server)
        meter.read()
        started = time.perf_counter()
        summary = index_corpus(corpus, image_lake, image_cfg, models=ModelPool())
        seconds = time.perf_counter() - started
        requests, size = meter.read()
        assert not summary.failed, summary.failed
        print(
            f'\nre-index with figure_vectors = "image" ({len(summary.recomputed)} documents): {seconds:.1f} s, '
            f"{requests} requests, {size / 1e6:.2f} MB (text vectors from the cache)"
        )
        default = replace(RetrievalConfig(), top_k_final=50, budget_chars=10**9)
        # top_k_images 50: the column shows the figure's rank in the image search, not only the top 4
        separate = replace(default, figure_search="separate", top_k_images=50)
        queries = [q for q in QUERIES if q.attachment == "image"]
        ranks = {
            "caption": [rank(open_retriever(caption_lake, caption_cfg), q, default) for q in queries],
            "image": [rank(open_retriever(image_lake, image_cfg), q, default) for q in queries],
            "separate": [rank(open_retriever(image_lake, image_cfg), q, separate) for q in queries],
        }
        mixed_cfg = replace(image_cfg, figure_vectors="image+caption")
        meter.read()  # the queries' vectors
        again_started = time.perf_counter()
        index_corpus(corpus, image_lake, mixed_cfg, models=ModelPool())
        print(
            f'switch to "image+caption": {time.perf_counter() - again_started:.1f} s, '
            f"{meter.read()[0]} requests (image vectors from the cache)"
        )
        ranks["image+caption"] = [rank(open_retriever(image_lake, mixed_cfg), q, default) for q in queries]
        print(f"\n{'figure question':<72} " + " ".join(f"{name:>13}" for name in ranks))
        for k, q in enumerate(queries):
            print(f"{q.question[:72]:<72} " + " ".join(f"{r[k]:>13}" for r in ranks.values()))
        print(
            "(rank of the figure node holding the answer, default retrieval, top 50: with caption vectors, image "
            'vectors, the separate image search (figure_search = "separate"; i<n> = its rank among the image '
            "search's figures) and image+caption vectors; '-' = not found (the image search, like dense search, "
            "drops hits below `threshold` 0: with random vectors about half the figures). FAKE VECTORS: the "
            "server's vectors are random, so these ranks only show the path working end to end, not retrieval "
            "quality)"
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
