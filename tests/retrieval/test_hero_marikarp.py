"""HERO's and Marikarp's retrieval options, each shown changing a ranking.

Pure parts on hand-made lists; the rest on a small lake indexed from Markdown documents
(with a metadata.csv and an expansions.csv), searched BM25-first as the default does.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kohaku_rag.document.tree import Attachment, Node, NodeKind
from kohaku_rag.indexing.index_config import IndexConfig
from kohaku_rag.indexing.pipeline import index_corpus
from kohaku_rag.lake.layout import Lake
from kohaku_rag.retrieval.ranking import content_type, interleave, rerank_top
from kohaku_rag.retrieval.rerankers import RerankerSpec
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig
from kohaku_rag.retrieval.retriever import Retriever, open_retriever
from tests.support.rerank_server import RerankServer, overlap


def test_interleave_alternates_keeping_each_order_and_dropping_repeats() -> None:
    merged = interleave([["b1", "s", "b2", "b3"], ["d1", "d2", "s", "d3"]], rrf_k=0)
    assert list(merged) == ["b1", "d1", "s", "d2", "b2", "b3", "d3"]
    scores = list(merged.values())
    assert scores == sorted(scores, reverse=True) and scores[0] == 1.0
    assert interleave([], 60) == {}


def _node(text: str, attachment: Attachment = Attachment.TEXT) -> Node:
    return Node("d:sec1:p1", "d", "d:sec1", NodeKind.PARAGRAPH, 0, "", text, attachment=attachment)


def test_content_types() -> None:
    assert content_type(_node("Anything", Attachment.TABLE)) == "table"
    assert content_type(_node("Axis labels read by OCR", Attachment.IMAGE)) == "figure"
    assert content_type(_node("Table 2: Energy per model. A 1.2 B 3.4")) == "table"
    assert content_type(_node("Figure 3: The PUE over time.")) == "figure"
    assert content_type(_node("2019 2020 2021 12.1 13.3 14.2 Scope 1 5.7 9.6 12.1 13.3 14.2")) == "table"
    assert content_type(_node("The tables turned in 2021 when the data center opened.")) == "text"


def test_rerank_top_reorders_only_the_top_n() -> None:
    class ByLength:
        def scores(self, query: str, passages):  # noqa: ANN001, ANN201
            return [float(len(p)) for p in passages]

    texts = {"a": "x", "b": "xxx", "c": "xx", "d": "xxxxxxx"}
    order, scores = rerank_top(["a", "b", "c", "d"], texts, "q", ByLength(), top_n=3, chars=2)
    assert order == ["b", "c", "a", "d"]  # cut to 2 characters: b and c tie at 2, the fused order breaks it
    assert scores == {"a": 1.0, "b": 2.0, "c": 2.0}


DOCS = {
    # Two documents saying the same thing, so only the metadata boost can separate them.
    "alpha2019": "# Training costs\n\n## Results\n\nTraining the transformer emitted carbon in our cloud experiments.\n",
    "beta2021": "# Training costs\n\n## Results\n\nTraining the transformer emitted carbon in our cloud experiments.\n",
    # A text paragraph and a table paragraph that match a query alike.
    "gamma2020": "# Hardware\n\n## Energy\n\nThe accelerator energy per inference request was measured for each "
    "accelerator model over a long period of time on many servers in production.\n\n"
    "Table 1: accelerator energy per inference request. A100 0.41 0.39 0.44 H100 0.31 0.30 0.29 T4 0.52 0.55\n",
    # Defines PUE; a third document uses only the long form.
    "delta2022": "# Facilities\n\n## Terms\n\nWe report the power usage effectiveness (PUE) of sites.\n",
    "eps2023": "# Cooling\n\n## Site\n\nThe facility's power usage effectiveness reached 1.08 last winter.\n",
}
METADATA = (
    "id,title,year,citation\n"
    'alpha2019,Training costs,2019,"Emma Strubell, Andrew McCallum. (2019). Training costs."\n'
    'beta2021,Training costs,2021,"Ana Other, Bo Person. (2021). Training costs."\n'
)


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> tuple[Lake, Path]:
    root = tmp_path_factory.mktemp("hero")
    corpus = root / "corpus"
    corpus.mkdir()
    for doc_id, text in DOCS.items():
        (corpus / f"{doc_id}.md").write_text(text)
    (corpus / "metadata.csv").write_text(METADATA)
    (corpus / "expansions.csv").write_text("term,expansion\nXPU,accelerator\n")
    lake = Lake(root / "lake")
    index_corpus(corpus, lake, IndexConfig(captioner="none"))
    return lake, corpus


@pytest.fixture()
def retriever(lake: tuple[Lake, Path]) -> Retriever:
    return open_retriever(lake[0], IndexConfig(captioner="none"))


BM25_FIRST = RetrievalConfig(mark_sentences=0, dense_weight=0.0)


def _order(retriever: Retriever, query: str, cfg: RetrievalConfig) -> list[str]:
    return [item.node_id for item in retriever.search([query], cfg)]


def test_a_table_node_rises_with_its_weight(retriever: Retriever) -> None:
    query = "accelerator energy per inference request"
    plain = _order(retriever, query, BM25_FIRST)
    table = next(n for n in plain if n.startswith("gamma2020") and "p2" in n)
    text = next(n for n in plain if n.startswith("gamma2020") and n != table)
    assert plain.index(text) < plain.index(table)
    weighted = _order(retriever, query, replace(BM25_FIRST, type_weight_table=2.0))
    assert weighted.index(table) < weighted.index(text)


def test_naming_an_author_or_year_boosts_that_document(retriever: Retriever) -> None:
    query = "How much carbon did training the transformer emit in Strubell's cloud experiments?"
    first = _order(retriever, query, BM25_FIRST)[0]
    assert first.startswith("alpha2019")  # equal texts: the first indexed wins the tie
    query_b = "How much carbon did training the transformer emit in the cloud experiments of 2021?"
    assert _order(retriever, query_b, BM25_FIRST)[0].startswith("alpha2019")
    boosted = replace(BM25_FIRST, metadata_boost=2.0)
    assert _order(retriever, query_b, boosted)[0].startswith("beta2021")
    assert _order(retriever, query_b, replace(boosted, metadata_fields=("author",)))[0].startswith("alpha2019")


def test_query_expansion_meets_the_long_form(retriever: Retriever) -> None:
    query = "What was the PUE?"
    assert retriever.aids is not None and "power usage effectiveness" in retriever.aids.expansions.forms["PUE"]
    plain = _order(retriever, query, BM25_FIRST)
    expanded = _order(retriever, query, replace(BM25_FIRST, query_expansion="bm25"))
    # BM25 alone never meets "power usage effectiveness" in a question saying "PUE".
    assert not any(n.startswith("eps2023") for n in plain)
    assert any(n.startswith("eps2023") for n in expanded)
    # The corpus's expansions.csv is applied too.
    assert retriever.aids.expansions.expand_query("XPU energy") == "XPU energy accelerator"


def test_interleave_option_changes_the_merge(retriever: Retriever) -> None:
    cfg = replace(RetrievalConfig(mark_sentences=0), fusion="interleave")
    query = "accelerator energy per inference request"
    bm25_first = retriever.bm25_hits(query, cfg)[0][0]
    assert _order(retriever, query, cfg)[0] == bm25_first


def test_hosted_reranker_reorders_the_fused_top_n(retriever: Retriever) -> None:
    query = "A100 H100 T4 accelerator energy for each over a of on in the"
    cfg = replace(BM25_FIRST, top_k_final=None)
    plain = _order(retriever, query, cfg)
    with RerankServer() as server:
        spec = RerankerSpec(url=server.root + "/v1/rerank")
        reranked = _order(retriever, query, replace(cfg, reranker=spec, rerank_top_n=2))
        (_path, body), *_ = server.requests
    assert len(body["documents"]) == 2 and body["query"] == query
    # BM25 puts the table first (its rare model names); the server scores the share of query
    # words present, stopwords included, where the text paragraph wins: the top 2 swap.
    texts = {n: node.text for n, node in retriever.store.get_nodes(plain[:2]).items()}
    expected = sorted(plain[:2], key=lambda n: -overlap(query, texts[n]))
    assert reranked == expected + plain[2:]
    assert reranked[:2] != plain[:2]


def test_config_keys_are_validated_and_round_trip() -> None:
    import tomllib

    from kohaku_rag.answering.qa_config_file import dump_toml, qa_config_from_mapping
    from kohaku_rag.config_files import ConfigKeyError

    with pytest.raises(ConfigKeyError, match='retrieval.fusion: "zip" is not one of the allowed values'):
        qa_config_from_mapping({"retrieval": {"fusion": "zip"}})
    with pytest.raises(ValueError, match="metadata_boost must be > 0"):
        RetrievalConfig(metadata_boost=0.0)
    with pytest.raises(ValueError, match='use them with bm25_mode = "fuse"'):
        RetrievalConfig(bm25_mode="append", type_weight_table=2.0)
    with pytest.raises(ConfigKeyError, match="retrieval.reranker: unknown RerankerSpec keys"):
        qa_config_from_mapping({"retrieval": {"reranker": {"backend": "http", "adress": "x"}}})
    cfg = qa_config_from_mapping(
        {
            "retrieval": {
                "type_weight_table": 2.0,
                "metadata_fields": ["author"],
                "reranker": {"backend": "http", "url": "http://127.0.0.1:8080/v1/rerank", "api": "llamacpp"},
            }
        }
    )
    again = qa_config_from_mapping(tomllib.loads(dump_toml(cfg)))
    assert again == cfg and again.retrieval.search.reranker == RerankerSpec(
        url="http://127.0.0.1:8080/v1/rerank", api="llamacpp"
    )
    # How the reranker is reached is not part of what it scores: stored retrievals are kept.
    faster = replace(
        cfg,
        retrieval=replace(
            cfg.retrieval,
            search=replace(
                cfg.retrieval.search,
                reranker=RerankerSpec(
                    url="http://127.0.0.1:8080/v1/rerank", api="llamacpp", max_concurrent=16, timeout=5.0
                ),
            ),
        ),
    )
    assert faster.retrieval_hash == cfg.retrieval_hash


def test_a_reranker_outage_fails_only_the_retrieval_row(retriever: Retriever) -> None:
    from kohaku_rag.answering.qa_config import QAConfig, RetrievalPart
    from kohaku_rag.answering.qa_tables import compute_retrievals
    from kohaku_rag.answers.records import Question

    with RerankServer() as server:
        spec = RerankerSpec(url=server.root + "/v1/rerank", max_retries=1)
        cfg = QAConfig(retrieval=RetrievalPart(use_planner=False, search=replace(BM25_FIRST, reranker=spec)))
        question = Question("q1", "accelerator energy per inference request", "kWh")
        server.faults.extend([503, 503])
        (failed,) = compute_retrievals([question], cfg, retriever, None)
        (fine,) = compute_retrievals([question], cfg, retriever, None)
    assert "RetriesExhausted" in failed["error"] and "after 2 attempts" in failed["error"]
    assert fine["error"] == "" and "gamma2020" in fine["context"]


def test_kohaku_search_takes_a_config_file(lake: tuple[Lake, Path], tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from kohaku_assets.cli import main

    root, corpus = lake
    config = tmp_path / "tables.toml"
    config.write_text("[retrieval]\ntype_weight_table = 2.0\n")
    query = "accelerator energy per inference request"
    firsts = []
    for extra in ([], ["--config", str(config)]):
        argv = ["search", "--lake", str(root.root), "--corpus", str(corpus), query, "--json", *extra]
        assert main(argv) == 0
        firsts.append(json.loads(capsys.readouterr().out.strip().splitlines()[-1])[0]["node_id"])
    assert firsts[0] != firsts[1] and firsts[1].startswith("gamma2020:sec1:p2")


def test_a_lake_without_search_aids_says_how_to_get_them(retriever: Retriever) -> None:
    bare = Retriever(retriever.embedder, retriever.store, retriever.bm25)
    assert bare.search(["What was the PUE?"], BM25_FIRST)  # the defaults need no aids
    with pytest.raises(FileNotFoundError, match="run `kohaku index` once"):
        bare.search(["What was the PUE?"], replace(BM25_FIRST, query_expansion="bm25"))
