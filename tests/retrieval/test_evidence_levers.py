"""The retrieval levers: sentence-window packing, the title/section field, the
fixed-size passage index and RM3 feedback, each shown changing what is retrieved or packed.

Pure parts on hand-made inputs; the rest on a small lake indexed from Markdown documents,
searched BM25-first as the default does.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kohaku_rag.document.tree import Node, NodeKind
from kohaku_rag.indexing.index_config import IndexConfig
from kohaku_rag.indexing.pipeline import index_corpus
from kohaku_rag.lake.layout import Lake
from kohaku_rag.retrieval.lexical import PassageIndex, rm3_weights
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig
from kohaku_rag.retrieval.retriever import Retriever, open_retriever
from kohaku_rag.retrieval.windows import window_spans, window_text


def test_window_spans_merge_overlaps_and_keep_document_order() -> None:
    scores = [0.0, 0.9, 0.0, 0.8, 0.0, 0.0, 0.0, 0.1]
    assert window_spans(scores, best=2, neighbours=1) == [(0, 5)]  # 1±1 and 3±1 touch: one window
    assert window_spans(scores, best=3, neighbours=0) == [(1, 2), (3, 4), (7, 8)]
    assert window_spans([0.0, 0.0, 0.0], best=2, neighbours=1) == [(0, 2)]  # nothing matches: the opening
    assert window_spans(scores, best=1, neighbours=0, keep=[6]) == [(1, 2), (6, 7)]
    assert window_spans([], best=2, neighbours=1) == []
    sentences = [f"S{i}." for i in range(8)]
    assert window_text(sentences, scores, best=1, neighbours=0) == "… S1. …"
    assert window_text(sentences, scores, best=3, neighbours=0) == "… S1. … S3. … S7."
    # A caption stays: it says what the unit's numbers are.
    captioned = [*sentences[:6], "The summaries of these Table 3: Models used for evaluation.", "S7."]
    assert (
        window_text(captioned, scores, best=1, neighbours=0)
        == "… S1. … The summaries of these Table 3: Models used for evaluation. …"
    )


def test_rm3_adds_the_feedback_terms_and_keeps_the_query() -> None:
    feedback = [(["zorblat", "frost", "cooling"], 2.0), (["zorblat", "frost"], 1.0)]
    weights = rm3_weights(["zorblat"], feedback, n_terms=2, query_weight=0.5, idf=lambda t: 1.0)
    assert set(weights) == {"zorblat", "frost"}  # the best 2 feedback terms
    assert weights["zorblat"] > weights["frost"] > 0
    assert rm3_weights(["x"], feedback, 5, 1.0, lambda t: 1.0) == {"x": 1.0}  # weight 1: the query alone
    assert rm3_weights([], feedback, 5, 0.5, lambda t: 1.0) == {}


def _paragraph(doc_id: str, i: int, text: str) -> Node:
    return Node(f"{doc_id}:sec1:p{i}", doc_id, f"{doc_id}:sec1", NodeKind.PARAGRAPH, i, "", text)


def test_passages_cross_paragraph_boundaries_and_cover_their_paragraphs() -> None:
    nodes = [
        _paragraph("d", 2, "gamma delta epsilon zeta eta theta iota kappa lambda"),
        _paragraph("d", 1, "filler words here alpha beta"),
        _paragraph("e", 1, "alpha unrelated mu nu xi omicron pi rho sigma tau"),
    ]
    index = PassageIndex.build(nodes, size=16, overlap=4)
    # Document d is one stream in reading order (p1 before p2): one passage holds both.
    assert index.covers[0] == ("d:sec1:p2", "d:sec1:p1")  # most-covered first
    assert index.paragraphs("alpha beta gamma", k=1) == ["d:sec1:p2", "d:sec1:p1"]
    with pytest.raises(ValueError, match="overlap"):
        PassageIndex.build(nodes, size=16, overlap=16)


LONG = (
    "The campus has several buildings. Each building has a roof. The roofs were painted last year. "
    "The painting took two months. The flux capacitor array consumed 412 MWh in 2022. "
    "Its cooling loop ran all year. Staff parked in the north lot. The lot has sixty spaces. "
    "Lunch was served daily. Visitors signed in at the front desk."
)
DOCS = {
    "alpha2020": f"# Facilities report\n\n## Operations\n\n{LONG}\n\n{LONG.replace('capacitor array consumed 412', 'capacitor bank consumed 97')}\n",
    # Only gamma's title says "quantum"; beta's text does, so plain BM25 puts beta first.
    "beta2021": "# Notes\n\n## Results\n\nThe quantum site reached an efficiency of 1.1 overall.\n",
    "gamma2022": "# Quantum datacenter\n\n## Results\n\nThe site reached an efficiency of 1.1 overall.\n",
    "delta2023": "# Cooling\n\n## Units\n\nThe zorblat cooling uses frost panels. Zorblat units chill halls.\n\n"
    "Frost panels cooled the halls by ten degrees in winter.\n",
}


@pytest.fixture(scope="module")
def retriever(tmp_path_factory: pytest.TempPathFactory) -> Retriever:
    root = tmp_path_factory.mktemp("levers")
    corpus = root / "corpus"
    corpus.mkdir()
    for doc_id, text in DOCS.items():
        (corpus / f"{doc_id}.md").write_text(text)
    lake = Lake(root / "lake")
    index_corpus(corpus, lake, IndexConfig(captioner="none"))
    return open_retriever(lake, IndexConfig(captioner="none"))


BM25_FIRST = RetrievalConfig(mark_sentences=0, dense_weight=0.0)


def _order(retriever: Retriever, query: str, cfg: RetrievalConfig) -> list[str]:
    return [item.node_id for item in retriever.search([query], cfg)]


def test_windows_pack_more_units_into_the_budget_with_their_evidence(retriever: Retriever) -> None:
    question = "How much energy did the flux capacitor array consume?"
    paragraphs = retriever.search([question], replace(BM25_FIRST, budget_chars=10**6))
    assert len(paragraphs) >= 2 and all(len(i.text) > 300 for i in paragraphs[:2])
    budget = len(paragraphs[0].text) + 100
    whole = retriever.search([question], replace(BM25_FIRST, budget_chars=budget, mark_sentences=1))
    windows = retriever.search(
        [question], replace(BM25_FIRST, budget_chars=budget, mark_sentences=1, pack="windows", window_min_chars=100)
    )
    assert len(whole) == 1  # only the first paragraph fits
    assert len(windows) >= 2  # its window leaves room for the next unit
    first = windows[0].text
    assert "consumed 412 MWh" in first and "The painting took two months." in first  # the neighbour
    assert "Lunch was served" not in first and first.startswith("…")
    assert windows[0].marks and windows[0].marks[0] in first  # the sentence marks stay


def test_the_title_field_ranks_the_document_the_heading_names(retriever: Retriever) -> None:
    query = "What efficiency did the quantum site reach?"
    plain = _order(retriever, query, BM25_FIRST)
    fielded = _order(retriever, query, replace(BM25_FIRST, field_weight=3.0))
    # A heavy enough field lets the title outweigh the text.
    assert plain[0].startswith("beta2021") and fielded[0].startswith("gamma2022")
    assert set(plain) == set(fielded)  # the field reorders body matches; it adds none


def test_rm3_finds_a_paragraph_that_shares_only_feedback_terms(retriever: Retriever) -> None:
    plain = _order(retriever, "zorblat", BM25_FIRST)
    expanded = _order(retriever, "zorblat", replace(BM25_FIRST, rm3_terms=5, rm3_docs=2))
    assert plain == ["delta2023:sec1:p1"]  # only the paragraph naming it
    assert "delta2023:sec1:p2" in expanded  # "frost panels ... halls" came from the feedback


def test_passage_fusion_adds_the_passage_lists_paragraphs(retriever: Retriever) -> None:
    cfg = replace(BM25_FIRST, passage_weight=1.0, passage_tokens=16, passage_overlap=4)
    # BM25 over paragraphs: only the one naming zorblat; the passage holding it also covers
    # the next paragraph (the same document's stream).
    assert "delta2023:sec1:p2" in _order(retriever, "zorblat", cfg)
    assert _order(retriever, "zorblat", BM25_FIRST) == ["delta2023:sec1:p1"]


def test_lever_keys_are_validated_and_leave_the_default_hash_alone() -> None:
    from kohaku_rag.answering.qa_config import QAConfig, RetrievalPart

    with pytest.raises(ValueError, match="pack"):
        RetrievalConfig(pack="sentences")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="passage_overlap"):
        RetrievalConfig(passage_tokens=64, passage_overlap=64)
    with pytest.raises(ValueError, match="rm3_query_weight"):
        RetrievalConfig(rm3_query_weight=1.5)
    base = QAConfig()
    assert replace(base, retrieval=RetrievalPart(search=RetrievalConfig(pack="paragraphs"))).retrieval_hash == (
        base.retrieval_hash
    )
    assert replace(base, retrieval=RetrievalPart(search=RetrievalConfig(pack="windows"))).retrieval_hash != (
        base.retrieval_hash
    )


def test_config_file_reads_the_lever_keys(tmp_path: Path) -> None:
    from kohaku_rag.answering.qa_config_file import load_qa_config

    path = tmp_path / "c.toml"
    path.write_text('config_version = 2\n[retrieval]\npack = "windows"\nfield_weight = 0.3\nrm3_terms = 10\n')
    search = load_qa_config(path).retrieval.search
    assert (search.pack, search.field_weight, search.rm3_terms) == ("windows", 0.3, 10)


def test_each_planned_query_keeps_its_best_units_with_a_query_share(retriever: Retriever) -> None:
    from kohaku_rag.retrieval.ranking import UnitScore, with_query_shares

    ranked = [UnitScore("a", 3, 2), UnitScore("b", 2, 2), UnitScore("c", 1, 1), UnitScore("d", 0.5, 1)]
    per_query = [{"a": 3.0, "b": 2.0}, {"d": 0.5, "c": 0.1}]
    assert [u.node_id for u in with_query_shares(ranked, per_query, 1)] == ["a", "d", "b", "c"]
    assert with_query_shares([], per_query, 1) == []
    # Two sub-queries, one unit of context: the question's best alone, unless each query has a share.
    queries = ["flux capacitor array energy", "zorblat cooling"]
    cut = replace(BM25_FIRST, top_k_final=2)
    assert not any(n.startswith("delta2023") for n in [i.node_id for i in retriever.search(queries, cut)])
    shared = [i.node_id for i in retriever.search(queries, replace(cut, query_share=1))]
    assert shared[0].startswith("alpha2020") and shared[1] == "delta2023:sec1:p1"


def test_the_planner_splits_per_entity_only_when_asked() -> None:
    from kohaku_rag.answering.planner import SPLIT_RULE, plan_request
    from kohaku_rag.answering.qa_config import QAConfig, RetrievalPart

    question = "How many times more energy did model A use than model B?"
    assert SPLIT_RULE in plan_request(question, 3, split_entities=True).messages[-1].content
    assert SPLIT_RULE not in plan_request(question, 3).messages[-1].content
    base = QAConfig()
    assert replace(base, retrieval=RetrievalPart(planner_split_entities=False)).retrieval_hash == base.retrieval_hash
    assert replace(base, retrieval=RetrievalPart(planner_split_entities=True)).retrieval_hash != base.retrieval_hash
