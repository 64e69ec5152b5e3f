"""The vector store's "binary" search: sign codes ranked by Hamming distance, the best
candidates re-scored exactly; compared with the exact sqlite-vec search on the same store."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kohaku_rag.document.tree import Node, NodeKind
from kohaku_rag.lake.layout import Lake
from kohaku_rag.stores.vectors import VectorStore, stored_search_mode

DIM = 128  # a multiple of 64: the codes are uint64 words


def clustered(rng: np.random.Generator, clusters: int, per: int, dim: int) -> np.ndarray:
    """Unit vectors around `clusters` centres, like embeddings of texts on a few topics."""
    centres = rng.standard_normal((clusters, dim))
    rows = np.repeat(centres, per, axis=0) + 0.8 * rng.standard_normal((clusters * per, dim))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def paragraph_doc(doc_id: str, vectors: np.ndarray) -> tuple[list[Node], dict[str, np.ndarray]]:
    nodes = [Node(doc_id, doc_id, None, NodeKind.DOCUMENT, 0, doc_id, doc_id)]
    vecs: dict[str, np.ndarray] = {}
    for i, vec in enumerate(vectors):
        node_id = f"{doc_id}:p{i}"
        nodes.append(Node(node_id, doc_id, doc_id, NodeKind.PARAGRAPH, i, "", f"text {node_id}"))
        vecs[node_id] = vec
    return nodes, vecs


def fill(store: VectorStore, rows: np.ndarray, docs: int) -> None:
    for d, part in enumerate(np.array_split(rows, docs)):
        nodes, vecs = paragraph_doc(f"doc{d}", part)
        store.upsert_document(f"doc{d}", "v1", nodes, vecs)


def recall(store: VectorStore, queries: np.ndarray, k: int, exact: list[list[str]]) -> float:
    found = [{h.node_id for h in store.search(q, ["paragraph"], k=k)} for q in queries]
    return float(np.mean([len(f & set(e)) / k for f, e in zip(found, exact)]))


@pytest.mark.parametrize("dim", [DIM, 40])  # 40: codes of 5 bytes, compared byte-wise
def test_binary_search_matches_exact_search(tmp_path: Path, dim: int) -> None:
    rng = np.random.default_rng(3)
    rows = clustered(rng, clusters=40, per=100, dim=dim)
    # Queries near stored rows (noise of norm ~0.3 against unit rows).
    noise = (0.3 / np.sqrt(dim)) * rng.standard_normal((30, dim)).astype(np.float32)
    queries = rows[rng.choice(len(rows), 30, replace=False)] + noise
    path = tmp_path / "v.sqlite"
    with VectorStore(path, dim) as store:
        assert store.search_mode == "exact"
        fill(store, rows, docs=8)
        exact = [[h.node_id for h in store.search(q, ["paragraph"], k=10)] for q in queries]
        exact_scores = [[round(h.score, 5) for h in store.search(q, ["paragraph"], k=10)] for q in queries[:5]]
    assert stored_search_mode(path) == "exact"

    # Switching an existing store builds the codes from its stored vectors; reopening keeps it.
    with VectorStore(path, dim, search="binary") as store:
        assert store.search_mode == "binary"
    assert stored_search_mode(path) == "binary"
    with VectorStore(path, dim) as store:
        assert store.search_mode == "binary"
        assert recall(store, queries, 10, exact) >= 0.9
        # What it returns is scored exactly: the same cosine as the exact search.
        got = [[round(h.score, 5) for h in store.search(q, ["paragraph"], k=10)] for q in queries[:5]]
        assert sum(a == b for a, b in zip(got, exact_scores)) >= 4
        # A stored vector finds itself first.
        assert store.search(rows[123], ["paragraph"], k=1)[0].node_id == "doc0:p123"


def test_binary_search_follows_writes_and_filters(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    rows = clustered(rng, clusters=10, per=60, dim=DIM)
    path = tmp_path / "v.sqlite"
    with VectorStore(path, DIM, search="binary") as store:
        fill(store, rows, docs=4)  # 150 rows per document
        target = rows[10]  # doc0:p10
        assert store.search(target, ["paragraph"], k=1)[0].node_id == "doc0:p10"
        only = store.search(target, ["paragraph"], k=5, doc_ids=["doc2", "doc3"])
        assert len(only) == 5 and {h.doc_id for h in only} <= {"doc2", "doc3"}
        assert store.search(target, ["paragraph"], k=5, doc_ids=["nope"]) == []

        # Another connection deletes doc0: this one's codes in memory are reloaded.
        with VectorStore(path, DIM) as other:
            other.delete_document("doc0")
        assert all(h.doc_id != "doc0" for h in store.search(target, ["paragraph"], k=20))
        # Its own upsert is seen at once.
        nodes, vecs = paragraph_doc("new", rows[10:11])
        store.upsert_document("new", "v1", nodes, vecs)
        assert store.search(target, ["paragraph"], k=1)[0].node_id == "new:p0"

    # Back to exact: the codes are dropped, the search is sqlite-vec's again.
    with VectorStore(path, DIM, search="exact") as store:
        assert store.search(target, ["paragraph"], k=1)[0].node_id == "new:p0"
    with pytest.raises(ValueError, match="not one of"):
        VectorStore(path, DIM, search="ivf")


def test_index_config_switches_a_built_lake_to_binary_search(tmp_path: Path, corpus: Path) -> None:
    """`vector_search` in the index config: a lake built exact is switched without
    re-embedding, searched the same way, and switched back."""
    from dataclasses import replace

    import kohaku_rag as kr
    from kohaku_rag.indexing.index_config import IndexConfig

    lake = tmp_path / "lake"
    kr.index(corpus, lake, progress=lambda _m: None)
    assert stored_search_mode(Lake(lake).vectors_path) == "exact"
    exact = [h.node_id for h in kr.open(lake).search("GPU power draw", budget_chars=2000)]

    summary = kr.index(
        corpus, lake, index_config=replace(IndexConfig(), vector_search="binary"), progress=lambda _m: None
    )
    assert not summary.recomputed  # no document re-parsed or re-embedded
    assert stored_search_mode(Lake(lake).vectors_path) == "binary"
    assert [h.node_id for h in kr.open(lake).search("GPU power draw", budget_chars=2000)] == exact

    kr.index(corpus, lake, index_config=IndexConfig(), progress=lambda _m: None)
    assert stored_search_mode(Lake(lake).vectors_path) == "exact"
