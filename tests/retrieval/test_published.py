"""KohakuRAG's published retrieval, pinned on small hand-computed cases.

Three queries found three units: a (query 1, similarity 0.9), b (all three: 0.5, 0.6, 0.4)
and c (query 3, 0.95). Frequencies a=1, b=3, c=1; summed scores a=0.9, b=1.5, c=0.95.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from kohaku_rag.answering.answer import counts_as_blank, deepen
from kohaku_rag.answers.records import Answer
from kohaku_rag.document.tree import Node, NodeKind
from kohaku_rag.retrieval.ranking import rerank
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig
from kohaku_rag.retrieval.retriever import Retriever
from kohaku_rag.stores.vectors import Hit

PER_QUERY = [{"a": 0.9, "b": 0.5}, {"b": 0.6}, {"b": 0.4, "c": 0.95}]


def order(strategy: str, alpha: float | None = None, weights=None) -> list[str]:
    return [u.node_id for u in rerank(PER_QUERY, strategy, alpha, weights)]


def test_published_combined_is_04_freq_over_max_plus_06_sum_over_max():
    # a: 0.4·1/3 + 0.6·0.9/1.5 = 0.4933; b: 0.4·3/3 + 0.6·1.5/1.5 = 1.0; c: 0.4/3 + 0.6·0.95/1.5 = 0.5133
    assert order("combined") == ["b", "c", "a"]
    units = {u.node_id: u for u in rerank(PER_QUERY, "combined")}
    assert (units["b"].frequency, units["b"].total) == (3, pytest.approx(1.5))
    # alpha is configurable: alpha 0 ranks by the summed score alone
    assert order("combined", 0.0) == ["b", "c", "a"]
    # one query (no frequency signal): freq 1 each, the summed score decides
    assert [u.node_id for u in rerank([{"x": 0.2, "y": 0.7}], "combined")] == ["y", "x"]


def test_published_combined_differs_from_ours_on_the_same_hits():
    # combined_max (alpha 0.25, best score over the top best score, frequency over 3 queries):
    # a: 0.25/3 + 0.75·0.9/0.95 = 0.794; b: 0.25 + 0.75·0.6/0.95 = 0.724; c: 0.0833 + 0.75 = 0.833
    assert order("combined_max") == ["c", "a", "b"]


def test_frequency_score_and_none():
    assert order("frequency") == ["b", "c", "a"]  # (freq, summed score), as KohakuRAG
    assert order("score_sum") == ["b", "c", "a"]  # KohakuRAG's "score": 1.5 > 0.95 > 0.9
    assert order("score") == ["c", "a", "b"]  # ours: best single score
    assert order("none") == ["a", "b", "c"]  # first appearance, query by query


def test_unknown_rerank_is_an_error_not_combined():
    with pytest.raises(ValueError, match="unknown rerank 'combined2'"):
        rerank(PER_QUERY, "combined2")
    with pytest.raises(ValueError, match="rerank 'best' is not one of combined, combined_max"):
        RetrievalConfig(rerank="best")  # type: ignore[arg-type]


def test_published_settings():
    cfg = RetrievalConfig.published()
    assert (cfg.rerank, cfg.effective_alpha, cfg.bm25_mode, cfg.dense_search) == ("combined", 0.4, "append", "joint")
    assert cfg.dense_kinds == ("sentence", "paragraph") and cfg.planned_query_weight == 1.0
    assert RetrievalConfig().effective_alpha == 0.25 and RetrievalConfig().rerank == "combined_max"


def test_deepen_multiplies_per_query_k_and_keeps_no_cut():
    cfg = RetrievalConfig(top_k=8, bm25_top_k=5, top_k_final=None, budget_chars=1000)
    third = deepen(cfg, 3)
    assert (third.top_k, third.bm25_top_k, third.top_k_final, third.budget_chars) == (24, 15, None, 3000)
    assert deepen(RetrievalConfig(top_k_final=4), 2).top_k_final == 8


def test_an_answer_without_ref_id_counts_as_blank():
    assert counts_as_blank(Answer("5", "5", "kWh", ()))
    assert counts_as_blank(Answer.blank("kWh"))
    assert not counts_as_blank(Answer("5", "5", "kWh", ("doc",)))


# ── the retriever on a fake index ─────────────────────────────────────────


def _node(node_id: str, text: str) -> Node:
    parts = node_id.split(":")
    kind = {1: NodeKind.DOCUMENT, 2: NodeKind.SECTION, 3: NodeKind.PARAGRAPH, 4: NodeKind.SENTENCE}[len(parts)]
    parent = ":".join(parts[:-1]) or None
    return Node(node_id, parts[0], parent, kind, 0, "", text)


@dataclass
class FakeStore:
    dense: list[tuple[str, float]]  # (node id, similarity), any kinds

    def search(self, vector, kinds, k):
        kinds = {str(k_) for k_ in kinds}
        hits = [Hit(n, n.split(":")[0], _node(n, "").kind, s) for n, s in self.dense if _node(n, "").kind in kinds]
        return sorted(hits, key=lambda h: -h.score)[:k]

    def get_nodes(self, ids):
        return {n: _node(n, f"text of {n} " * 3) for n in ids}

    def documents(self):
        return []

    def children(self, node_id):
        return []


class FakeBM25:
    def __init__(self, hits):
        self.hits = hits

    def search(self, query, k):
        return self.hits[:k]


class FakeEmbedder:
    def embed(self, texts, role="query"):
        return np.zeros((len(texts), 2), dtype=np.float32)


def _retriever(dense, bm25=()) -> Retriever:
    return Retriever(FakeEmbedder(), FakeStore(dense), FakeBM25(list(bm25)) if bm25 else None)  # type: ignore[arg-type]


def test_dedup_runs_before_the_cut_so_freed_slots_refill():
    # Section expansion maps p1 and p2 to d:s1 (a repeat); the third unit must fill the slot.
    r = _retriever([("d:s1:p1", 0.9), ("d:s1:p2", 0.8), ("d:s2:p1", 0.7)])
    cfg = RetrievalConfig(
        top_k_final=2, expand_to="section", bm25_top_k=0, bm25_mode="append", rerank="score_sum", mark_sentences=0
    )
    assert [i.node_id for i in r.search(["q"], cfg)] == ["d:s1", "d:s2"]


def test_top_k_final_none_keeps_every_unit():
    r = _retriever([("d:s1:p1", 0.9), ("d:s1:p2", 0.8), ("d:s2:p1", 0.7)])
    cfg = RetrievalConfig(top_k_final=None, bm25_top_k=0, bm25_mode="append", mark_sentences=0, budget_chars=10**6)
    assert len(r.search(["q"], cfg)) == 3


def test_bm25_append_adds_its_hits_after_the_dense_ones():
    dense = [("d:s1:p1:s1", 0.9), ("d:s1:p2", 0.5), ("d:s2:p3", 0.4)]
    bm25 = [("d:s9:p9", 12.0), ("d:s1:p2", 8.0), ("d:s8:p1", 3.0)]
    cfg = RetrievalConfig.published(top_k_final=2, mark_sentences=0, budget_chars=10**6)
    got = [i.node_id for i in _retriever(dense, bm25).search(["q"], cfg)]
    # joint dense search over sentences and paragraphs: the sentence hit counts for its
    # paragraph; cut to 2; then BM25's hits not already there, in BM25 order
    assert got == ["d:s1:p1", "d:s1:p2", "d:s9:p9", "d:s8:p1"]
    # fused (ours): p2, found by both, beats BM25's first hit: 0.1/61 + 1/62 > 1/61
    fused = RetrievalConfig(top_k_final=2, mark_sentences=0, budget_chars=10**6, dense_kinds=("sentence", "paragraph"))
    assert [i.node_id for i in _retriever(dense, bm25).search(["q"], fused)] == ["d:s1:p2", "d:s9:p9"]
