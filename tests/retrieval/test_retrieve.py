"""The pure parts of retrieval: fusion, cross-query rerank, dedup and the budget."""

from kohaku_rag.retrieval.context import ContextItem, pack
from kohaku_rag.retrieval.ranking import dedup, fuse_query, rerank


def test_rrf_fusion_adds_weighted_reciprocal_ranks():
    fused = fuse_query([(["a", "b"], 1.0), (["b", "c"], 2.0)], rrf_k=10)
    assert fused["a"] == 1 / 11
    assert fused["b"] == 1 / 12 + 2 / 11
    assert fused["c"] == 2 / 12


def test_rerank_strategies():
    per_query = [{"a": 0.9, "b": 0.5}, {"b": 0.6}, {"b": 0.4, "c": 0.95}]
    assert [u.node_id for u in rerank(per_query, "score", 0.5)] == ["c", "a", "b"]
    assert [u.node_id for u in rerank(per_query, "frequency", 0.5)][0] == "b"
    combined = rerank(per_query, "combined", 1.0)
    assert combined[0].node_id == "b" and combined[0].frequency == 3
    assert rerank([], "combined", 0.5) == []


def test_rerank_weights_let_the_question_outvote_its_rewrites():
    # "q" is the question's own best hit; two rewrites agree on "r".
    per_query = [{"q": 1.0, "r": 0.2}, {"r": 0.9}, {"r": 0.9}]
    assert rerank(per_query, "combined", 0.5)[0].node_id == "r"
    weighted = rerank(per_query, "combined", 0.5, weights=[1.0, 0.25, 0.25])
    assert weighted[0].node_id == "q"
    assert weighted[1].frequency == 1.5 and weighted[1].score == 0.9 * 0.25


def test_dedup_modes():
    ids = ["d:sec1:p1", "d:sec1:p1", "d:sec1", "d:sec2:p3", "e:sec1:p1"]
    assert dedup(ids, "none") == ids
    assert dedup(ids, "node_id") == ["d:sec1:p1", "d:sec1", "d:sec2:p3", "e:sec1:p1"]
    # "d:sec1" contains the better-ranked "d:sec1:p1", so the tree mode drops it
    assert dedup(ids, "tree") == ["d:sec1:p1", "d:sec2:p3", "e:sec1:p1"]
    assert dedup(["d:sec1:p10", "d:sec1:p1"], "tree") == ["d:sec1:p10", "d:sec1:p1"]


def _item(node_id, n):
    return ContextItem("d", node_id, "paragraph", 1, 1.0, "x" * n)


def test_pack_never_exceeds_budget_and_cuts_the_last_item():
    items = [_item("a", 300), _item("b", 300), _item("c", 300)]
    packed = pack(items, 800)
    assert [i.node_id for i in packed] == ["a", "b", "c"]
    assert sum(len(i.text) for i in packed) == 800
    assert [i.node_id for i in pack(items, 650)] == ["a", "b"]  # 50 chars left: too little to be useful
