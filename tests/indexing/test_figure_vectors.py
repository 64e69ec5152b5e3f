"""Figures in the vector space: with jina-embeddings-v4 (a real local fake server), a figure
paragraph's vector comes from its image; a question reaches a figure whose caption shares
none of its words; a changed image re-embeds that figure alone; a failed image request keeps
the document out of date and the next run retries it; figure_search = "separate" merges an
image search of its own into the context."""

from __future__ import annotations

import base64
import hashlib
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from kohaku_rag.document.tree import Attachment
from kohaku_rag.embed import EmbedderSpec
from kohaku_rag.indexing import steps as ix
from kohaku_rag.indexing.index_config import IndexConfig
from kohaku_rag.indexing.pipeline import index_corpus
from kohaku_rag.lake.layout import Lake
from kohaku_rag.model_pool import ModelPool
from kohaku_rag.parse.pdf import parse_pdf
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig
from kohaku_rag.retrieval.retriever import open_retriever
from tests.support.embedding_server import EmbeddingServer, expected_vector
from tests.support.figure_docs import CAPTIONS, chart_png, write_figure_pdf

DOC = "campaign"
DIM = 128
# Shares no word with either caption ("Figure 1: Quarterly totals of the first illustrative series.").
QUESTION = "How much cooling water did pumps use?"


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def figure_images(pdf: Path) -> list[bytes]:
    """The figure images as the parser stores them (rendered from the page)."""
    parsed = parse_pdf(pdf, DOC)
    return [p.image for s in parsed.sections for p in s.paragraphs if p.attachment is Attachment.IMAGE and p.image]


def digest(image: bytes) -> str:
    return hashlib.sha256(image).hexdigest()


KEY_ENV = "KOHAKU_TEST_JINA_KEY"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddingServer]:
    monkeypatch.setenv(KEY_ENV, "jina-test-key")
    srv = EmbeddingServer().start()
    yield srv
    srv.stop()


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_figure_pdf(folder / f"{DOC}.pdf", (chart_png(240, 3), chart_png(200, 4)))
    return folder


def config(server: EmbeddingServer, **kwargs: object) -> IndexConfig:
    spec = EmbedderSpec(
        backend="jina", model="jina-embeddings-v4", dimensions=DIM, base_url=server.base_url, api_key_env=KEY_ENV
    )
    return replace(IndexConfig(embedder=spec, captioner="none"), **kwargs)  # type: ignore[arg-type]


def image_requests(server: EmbeddingServer, since: int = 0) -> list[bytes]:
    return [image for request in server.requests[since:] for image in request.images]


def figure_ids(lake: Lake) -> list[str]:
    nodes = ix.indexed_tree(lake, DOC, IndexConfig())
    return [n.node_id for n in nodes if n.attachment is Attachment.IMAGE and n.kind == "paragraph"]


def leaf_vectors(lake: Lake) -> dict[str, np.ndarray]:
    ids, _, matrix = ix.read_vectors(lake, ix.LEAF_EMBEDDINGS, DOC)
    return dict(zip(ids, matrix, strict=True))


def dense_only(**kwargs: object) -> RetrievalConfig:
    """Dense paragraph search alone, so the rank says what the vectors do."""
    return replace(RetrievalConfig(), bm25_top_k=0, dense_weight=1.0, mark_sentences=0, **kwargs)  # type: ignore[arg-type]


def test_question_reaches_a_figure_through_its_image_vector(
    tmp_path: Path, server: EmbeddingServer, corpus: Path
) -> None:
    first, second = figure_images(corpus / f"{DOC}.pdf")
    server.image_like[digest(first)] = QUESTION  # the first figure "shows" what the question asks
    lake = Lake(tmp_path / "lake")
    summary = index_corpus(corpus, lake, config(server), models=ModelPool())
    assert summary.recomputed == [DOC] and not summary.failed

    fig1, fig2 = figure_ids(lake)
    vectors = leaf_vectors(lake)
    np.testing.assert_allclose(vectors[fig1], unit(expected_vector(QUESTION, "retrieval.query", DIM)), atol=1e-5)
    assert image_requests(server) == [first, second]
    for request in server.requests:
        assert request.body["dimensions"] == DIM and request.body["model"] == "jina-embeddings-v4"
        assert request.body["task"] == "retrieval.passage"

    items = open_retriever(lake, config(server)).search([QUESTION], dense_only(top_k_final=1))
    assert [i.node_id for i in items] == [fig1] and items[0].attachment == "image"
    assert items[0].text.startswith(CAPTIONS[0]) and items[0].media_hash == digest(first)
    assert not set(QUESTION.lower().split()) & set(CAPTIONS[0].lower().split())

    # Control: the same lake with caption vectors does not put that figure first.
    caption_lake = Lake(tmp_path / "caption-lake")
    index_corpus(corpus, caption_lake, config(server, figure_vectors="caption"), models=ModelPool())
    items = open_retriever(caption_lake, config(server, figure_vectors="caption")).search(
        [QUESTION], dense_only(top_k_final=1)
    )
    assert [i.node_id for i in items] != [fig1]


def test_changed_image_re_embeds_only_that_figure(tmp_path: Path, server: EmbeddingServer, corpus: Path) -> None:
    lake = Lake(tmp_path / "lake")
    cfg = config(server)
    index_corpus(corpus, lake, cfg, models=ModelPool())
    first, second = figure_images(corpus / f"{DOC}.pdf")
    assert image_requests(server) == [first, second]
    before = leaf_vectors(lake)

    pdf = write_figure_pdf(corpus / f"{DOC}.pdf", (chart_png(240, 3), chart_png(120, 2)))  # figure 2 redrawn
    _, changed = figure_images(pdf)
    sent = len(server.requests)
    assert index_corpus(corpus, lake, cfg, models=ModelPool()).recomputed == [DOC]
    assert image_requests(server, sent) == [changed]  # figure 1 came from the cache
    assert all("image" in item for r in server.requests[sent:] for item in r.body["input"])  # text: cached
    after = leaf_vectors(lake)
    fig1, fig2 = figure_ids(lake)
    np.testing.assert_array_equal(after[fig1], before[fig1])
    assert not np.allclose(after[fig2], before[fig2])

    sent = len(server.requests)
    assert index_corpus(corpus, lake, cfg, models=ModelPool()).skipped == [DOC]  # nothing changed
    mixed = config(server, figure_vectors="image+caption")
    assert index_corpus(corpus, lake, mixed, models=ModelPool()).recomputed == [DOC]  # the option changed
    assert len(server.requests) == sent  # ... but every vector was cached
    image = unit(expected_vector(f"image:{digest(first)}", "retrieval.passage", DIM))
    caption = after[f"{fig1}:s1"]  # the caption is one sentence
    np.testing.assert_allclose(leaf_vectors(lake)[fig1], unit(image + caption), atol=1e-5)


def test_failed_image_request_keeps_the_document_out_of_date(
    tmp_path: Path, server: EmbeddingServer, corpus: Path
) -> None:
    lake = Lake(tmp_path / "lake")
    cfg = config(server)
    server.fail_images = True
    summary = index_corpus(corpus, lake, cfg, models=ModelPool())
    assert summary.recomputed == [DOC] and not summary.failed  # indexed, with caption vectors
    fig1, fig2 = figure_ids(lake)
    assert set(ix.image_errors(lake, DOC)) == {fig1, fig2} and "HTTP 422" in ix.image_errors(lake, DOC)[fig1]
    assert fig1 not in leaf_vectors(lake)  # propagated from its caption, as with a text-only embedder
    assert ix.stored_version(lake, ix.INDEX_ROWS, DOC).endswith(ix.IMAGES_INCOMPLETE)

    server.fail_images = False
    sent = len(server.requests)
    assert index_corpus(corpus, lake, cfg, models=ModelPool()).recomputed == [DOC]  # retried, not skipped
    assert len(image_requests(server, sent)) == 2 and ix.image_errors(lake, DOC) == {}
    assert {fig1, fig2} <= set(leaf_vectors(lake))
    assert index_corpus(corpus, lake, cfg, models=ModelPool()).skipped == [DOC]  # complete now


def test_text_only_embedder_keeps_caption_vectors(tmp_path: Path, server: EmbeddingServer, corpus: Path) -> None:
    lake = Lake(tmp_path / "lake")
    v3 = EmbedderSpec(backend="jina", dimensions=DIM, base_url=server.base_url, api_key_env=KEY_ENV)
    cfg = IndexConfig(embedder=v3, captioner="none")
    index_corpus(corpus, lake, cfg, models=ModelPool())
    assert image_requests(server) == [] and not set(figure_ids(lake)) & set(leaf_vectors(lake))
    # The figure_vectors key only enters the hash of a multimodal embedder: old lakes keep theirs.
    assert replace(cfg, figure_vectors="caption").embed_hash == cfg.embed_hash
    assert config(server, figure_vectors="caption").embed_hash != config(server).embed_hash


def test_separate_image_search_merges_figures_into_the_context(
    tmp_path: Path, server: EmbeddingServer, corpus: Path
) -> None:
    first, _ = figure_images(corpus / f"{DOC}.pdf")
    server.image_like[digest(first)] = QUESTION
    lake = Lake(tmp_path / "lake")
    index_corpus(corpus, lake, config(server), models=ModelPool())
    fig1, fig2 = figure_ids(lake)
    retriever = open_retriever(lake, config(server))

    separate = dense_only(figure_search="separate", top_k_images=1, top_k_final=2)
    items = retriever.search([QUESTION], separate)
    texts, figures = items[:-1], items[-1:]
    assert [f.node_id for f in figures] == [fig1] and figures[0].media_hash == digest(first)
    assert len(texts) == 2 and all(i.attachment == "text" for i in texts)  # top_k_final went to text
    assert figures[0].score == pytest.approx(1.0, abs=1e-5)

    both = retriever.search([QUESTION], replace(separate, top_k_images=2))
    assert [i.node_id for i in both if i.attachment == "image"] == [fig1, fig2]  # best first, for img_k
    tight = retriever.search([QUESTION], replace(separate, top_k_images=2, budget_chars=len(CAPTIONS[0]) + 90))
    assert tight[-1].node_id in (fig1, fig2) and sum(len(i.text) for i in tight) <= len(CAPTIONS[0]) + 90
    with pytest.raises(ValueError, match="top_k_images"):
        RetrievalConfig(figure_search="separate", top_k_images=0)


def test_dagster_path_shares_the_step(tmp_path: Path, server: EmbeddingServer, corpus: Path) -> None:
    """The leaf_embeddings asset calls the same ix.embed_document: one check that the copied
    corpus indexes through the Dagster runner with image vectors."""
    import json

    from kohaku_assets.resources import KohakuSettings
    from kohaku_assets.runner import run_index

    mp = pytest.MonkeyPatch()
    mp.setenv("DAGSTER_HOME", str(tmp_path / "lake" / ".dagster"))
    try:
        cfg_file = tmp_path / "index.json"
        spec = {"backend": "jina", "model": "jina-embeddings-v4", "dimensions": DIM, "base_url": server.base_url}
        cfg_file.write_text(json.dumps({"captioner": "none", "embedder": {**spec, "api_key_env": KEY_ENV}}))
        copy = tmp_path / "corpus-copy"
        shutil.copytree(corpus, copy)
        settings = KohakuSettings(
            lake_root=str(tmp_path / "lake"), corpus_dir=str(copy), index_config_file=str(cfg_file)
        )
        assert run_index(settings, progress=lambda _m: None).recomputed == [DOC]
    finally:
        mp.undo()
    assert len(image_requests(server)) == 2
    assert set(figure_ids(settings.lake)) <= set(leaf_vectors(settings.lake))


def test_page_images_index_each_page_as_an_image_node(tmp_path: Path, server: EmbeddingServer, corpus: Path) -> None:
    from kohaku_rag.answering.prompt import figure_images as attached_images
    from kohaku_rag.parse.pdf_pages import PAGE_SECTION, render_pages

    ((number, page_png),) = render_pages(corpus / f"{DOC}.pdf")
    server.image_like[digest(page_png)] = QUESTION
    lake = Lake(tmp_path / "lake")
    cfg = config(server, page_images=True)
    assert index_corpus(corpus, lake, cfg, models=ModelPool()).recomputed == [DOC]
    nodes = ix.indexed_tree(lake, DOC, cfg)
    (page,) = [n for n in nodes if n.attachment is Attachment.PAGE]
    assert page.text == "" and page.page == number == 1 and page.media_hash == digest(page_png)
    assert [n.title for n in nodes if n.node_id == page.parent_id] == [PAGE_SECTION]
    assert lake.blob(digest(page_png)).read_bytes() == page_png
    assert len(image_requests(server)) == 3  # two figures and the page

    retriever = open_retriever(lake, cfg)
    (item,) = retriever.search([QUESTION], dense_only(top_k_final=1))
    assert item.node_id == page.node_id and item.attachment == "page"
    assert attached_images([item], 1, lambda h: lake.blob(h).read_bytes()) == (
        "data:image/png;base64," + base64.b64encode(page_png).decode(),
    )
    assert page.node_id not in {n for n, _ in retriever.bm25_hits("Page images campaign", RetrievalConfig())}
    separate = retriever.search([QUESTION], dense_only(figure_search="separate", top_k_images=1))
    assert separate[-1].node_id == page.node_id
    with pytest.raises(ValueError, match="page_images = true needs an embedder"):
        IndexConfig(page_images=True)


def test_a_failed_chunk_of_images_fails_alone(tmp_path: Path, server: EmbeddingServer) -> None:
    from kohaku_rag.embed import make_embedder
    from kohaku_rag.indexing.figure_vectors import embed_in_chunks

    cfg = config(server)
    images = [chart_png(250 - 10 * k, 2) for k in range(4)]
    server.faults.append("422")  # the first request is refused
    results = embed_in_chunks(make_embedder(cfg.embedder, tmp_path), images, chunk=2)  # type: ignore[arg-type]
    assert [isinstance(r, Exception) for r in results] == [True, True, False, False]
    assert "HTTP 422" in str(results[0])
    again = embed_in_chunks(make_embedder(cfg.embedder, tmp_path), images, chunk=2)  # type: ignore[arg-type]
    assert not any(isinstance(r, Exception) for r in again)
    assert image_requests(server, 2) == images[:2]  # the retry sent only the refused chunk


def test_figure_without_caption_is_kept_for_its_image(tmp_path: Path, server: EmbeddingServer) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    pdf = write_figure_pdf(corpus / f"{DOC}.pdf", (chart_png(240, 3), chart_png(200, 4)), chart_png(160, 5))
    *_, bare = figure_images(pdf)
    server.image_like[digest(bare)] = QUESTION
    lake = Lake(tmp_path / "lake")
    index_corpus(corpus, lake, config(server), models=ModelPool())
    nodes = ix.indexed_tree(lake, DOC, config(server))
    (node,) = [n for n in nodes if n.attachment is Attachment.IMAGE and n.media_hash == digest(bare)]
    assert node.text == "" and node.node_id in leaf_vectors(lake)
    retriever = open_retriever(lake, config(server))
    assert [i.node_id for i in retriever.search([QUESTION], dense_only(top_k_final=1))] == [node.node_id]
    assert node.node_id not in {n for n, _ in retriever.bm25_hits("Measurement campaign", RetrievalConfig())}
    # A text-only embedder has nothing to search it by: left out, as before.
    v3 = IndexConfig(
        embedder=EmbedderSpec(backend="jina", dimensions=DIM, base_url=server.base_url, api_key_env=KEY_ENV),
        captioner="none",
    )
    text_lake = Lake(tmp_path / "text-lake")
    index_corpus(corpus, text_lake, v3, models=ModelPool())
    assert digest(bare) not in {n.media_hash for n in ix.indexed_tree(text_lake, DOC, v3)}
