"""The two search indexes: sqlite-vec vector store and BM25 over paragraphs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import apsw
import numpy as np
import pytest
import sqlite_vec
from rank_bm25 import BM25Okapi

from kohaku_rag.document.tree import (
    Node,
    NodeKind,
    ParsedDocument,
    ParsedParagraph,
    ParsedSection,
    build_tree,
    nodes_to_table,
)
from kohaku_rag.parse.sentences import split_sentences
from kohaku_rag.stores.bm25 import BM25Index, build, flat_chunks, paragraph_rows, tokenize
from kohaku_rag.stores.vectors import DocumentUpsert, IndexMismatchError, VectorStore

DIM = 24
REPO = Path(__file__).resolve().parents[2]


def synthetic_doc(doc_id: str, sections: int, paragraphs: int, sentences: int) -> list[Node]:
    """A regular tree: `sections` x `paragraphs` x `sentences`, texts naming their node."""
    nodes = [Node(doc_id, doc_id, None, NodeKind.DOCUMENT, 0, f"title {doc_id}", f"doc {doc_id}")]
    for i in range(1, sections + 1):
        sid = f"{doc_id}:sec{i}"
        nodes.append(Node(sid, doc_id, doc_id, NodeKind.SECTION, i, f"section {i}", f"text {sid}", page=i))
        for j in range(1, paragraphs + 1):
            pid = f"{sid}:p{j}"
            nodes.append(Node(pid, doc_id, sid, NodeKind.PARAGRAPH, j, "", f"text {pid}", page=i))
            for k in range(1, sentences + 1):
                nid = f"{pid}:s{k}"
                nodes.append(Node(nid, doc_id, pid, NodeKind.SENTENCE, k, "", f"text {nid}", page=i))
    return nodes


def unit_rows(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def random_vectors(nodes: list[Node], rng: np.random.Generator) -> dict[str, np.ndarray]:
    return dict(zip((n.node_id for n in nodes), unit_rows(rng, len(nodes))))


def raw_counts(path: Path, doc_id: str) -> dict[str, int]:
    """Rows of `doc_id` in every table, read behind the store's back."""
    conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    try:
        return {
            table: conn.execute(f"SELECT count(*) FROM {table} WHERE doc_id = ?", (doc_id,)).fetchone()[0]
            for table in ("documents", "nodes", "node_vectors", "vec_sentence", "vec_paragraph")
        }
    finally:
        conn.close()


@pytest.fixture
def corpus(tmp_path: Path):
    """Six documents, ~2,900 vectors over all four kinds, in a fresh store."""
    rng = np.random.default_rng(7)
    docs = {f"doc{d}": synthetic_doc(f"doc{d}", 4, 6, 15) for d in range(6)}
    vectors = {d: random_vectors(nodes, rng) for d, nodes in docs.items()}
    store = VectorStore(tmp_path / "vectors.sqlite", DIM)
    store.apply_changes([DocumentUpsert(d, "v1", docs[d], vectors[d]) for d in docs], [])
    yield store, docs, vectors
    store.close()


def brute_force(docs, vectors, query, kinds, k, doc_ids=None):
    pairs = [
        (n.node_id, vectors[d][n.node_id])
        for d, nodes in docs.items()
        if doc_ids is None or d in doc_ids
        for n in nodes
        if n.kind in kinds
    ]
    scores = np.stack([v for _, v in pairs]).astype(np.float64) @ (query / np.linalg.norm(query))
    order = np.argsort(-scores)[:k]
    return [pairs[i][0] for i in order], scores[order]


@pytest.mark.parametrize(
    "kinds, doc_ids",
    [
        (("sentence",), None),
        (("paragraph",), None),
        (("sentence", "paragraph"), None),
        (("section", "document"), None),
        (("sentence", "paragraph", "section", "document"), None),
        (("sentence", "paragraph"), {"doc1", "doc4"}),
        (("paragraph", "section"), {"doc2"}),
    ],
)
def test_search_equals_numpy_cosine_top_k(corpus, kinds, doc_ids):
    store, docs, vectors = corpus
    rng = np.random.default_rng(11)
    for query in rng.standard_normal((5, DIM)):
        hits = store.search(query, kinds=kinds, k=12, doc_ids=doc_ids)
        ids, scores = brute_force(docs, vectors, query, set(kinds), 12, doc_ids)
        assert [h.node_id for h in hits] == ids
        np.testing.assert_allclose([h.score for h in hits], scores, atol=1e-5)
        assert all(h.kind in kinds and (doc_ids is None or h.doc_id in doc_ids) for h in hits)


def test_counts_and_stored_vectors(corpus):
    store, docs, vectors = corpus
    assert store.count("sentence") == 6 * 4 * 6 * 15
    assert store.count("paragraph") == 6 * 4 * 6
    assert store.count("section") == 6 * 4
    assert store.count("document") == 6
    for node_id in ("doc3", "doc3:sec2", "doc3:sec2:p4", "doc3:sec2:p4:s9"):
        np.testing.assert_allclose(store.vector(node_id), vectors["doc3"][node_id], atol=1e-6)
    assert store.vector("missing") is None
    with pytest.raises(ValueError, match="unknown node kind 'chapter'"):
        store.search(np.ones(DIM), kinds=["chapter"])


def test_k_applies_after_kind_and_document_filters(tmp_path):
    """Paragraphs of doc A sit right on the query; sentences and doc B are far. A filter
    applied after a global top-k would return too few hits."""
    rng = np.random.default_rng(3)
    query = unit_rows(rng, 1)[0]
    a, b = synthetic_doc("a", 2, 5, 4), synthetic_doc("b", 2, 5, 4)
    va = {
        n.node_id: query + 0.01 * rng.standard_normal(DIM)
        if n.kind is NodeKind.PARAGRAPH
        else -query + 0.5 * rng.standard_normal(DIM)
        for n in a
    }
    vb = {n.node_id: query + 0.001 * rng.standard_normal(DIM) for n in b}
    with VectorStore(tmp_path / "v.sqlite", DIM) as store:
        store.upsert_document("a", "1", a, va)
        store.upsert_document("b", "1", b, vb)
        sentence_hits = store.search(query, kinds=["sentence"], k=7, doc_ids=["a"])
        assert len(sentence_hits) == 7
        assert {h.kind for h in sentence_hits} == {NodeKind.SENTENCE} and {h.doc_id for h in sentence_hits} == {"a"}
        assert all(h.score < 0.5 for h in sentence_hits)
        mixed = store.search(query, kinds=["sentence", "paragraph"], k=12, doc_ids=["a"])
        assert [h.kind for h in mixed] == [NodeKind.PARAGRAPH] * 10 + [NodeKind.SENTENCE] * 2
        assert store.search(query, doc_ids=[]) == []


def test_upsert_replaces_and_delete_removes_everything(corpus):
    store, docs, vectors = corpus
    rng = np.random.default_rng(5)
    old_ids = {n.node_id for n in docs["doc2"]}
    new_nodes = synthetic_doc("doc2", 2, 3, 4)  # fewer nodes: some old ids must vanish
    new_vectors = random_vectors(new_nodes, rng)
    store.upsert_document("doc2", "v2", new_nodes, new_vectors, title="Doc two", url="https://example.org/2")

    assert store.document_versions()["doc2"] == "v2"
    assert set(store.get_nodes(old_ids)) == {n.node_id for n in new_nodes}
    assert store.count("sentence") == 5 * 360 + 2 * 3 * 4
    np.testing.assert_allclose(store.vector("doc2:sec1:p1:s1"), new_vectors["doc2:sec1:p1:s1"], atol=1e-6)
    for node_id in ("doc2:sec4:p6:s15", "doc2:sec3:p1"):  # dropped nodes: never found again
        hits = store.search(vectors["doc2"][node_id], kinds=["sentence", "paragraph"], k=3)
        assert node_id not in {h.node_id for h in hits}
    row = next(r for r in store.documents() if r.doc_id == "doc2")
    assert (row.title, row.url, row.n_nodes) == ("Doc two", "https://example.org/2", len(new_nodes))

    store.delete_document("doc2")
    assert raw_counts(store.path, "doc2") == dict.fromkeys(
        ("documents", "nodes", "node_vectors", "vec_sentence", "vec_paragraph"), 0
    )
    assert raw_counts(store.path, "doc3")["vec_sentence"] == 360
    assert "doc2" not in store.document_versions()
    assert all(h.doc_id != "doc2" for h in store.search(new_vectors["doc2:sec1:p1"], k=50))
    store.delete_document("doc2")  # deleting an absent document is a no-op


def test_nodes_round_trip_from_tree_and_arrow(tmp_path):
    parsed = ParsedDocument(
        "paper",
        "A paper",
        [
            ParsedSection(
                "Intro", [ParsedParagraph("GPUs draw power. Fig. 3 shows it.", page=1, bbox=(1.5, 2.0, 300.25, 40.0))]
            ),
            ParsedSection("Results", [ParsedParagraph("Emissions were 552 tCO2e.", page=2)]),
        ],
    )
    nodes = build_tree(parsed, split_sentences)
    rng = np.random.default_rng(0)
    with VectorStore(tmp_path / "v.sqlite", DIM) as store:
        store.upsert_document("paper", "h1", nodes_to_table(nodes), random_vectors(nodes, rng))
        assert store.get_nodes([n.node_id for n in nodes] + ["nope"]) == {n.node_id: n for n in nodes}
        assert [c.node_id for c in store.children("paper:sec1:p1")] == ["paper:sec1:p1:s1", "paper:sec1:p1:s2"]
        assert [c.node_id for c in store.children("paper")] == ["paper:sec1", "paper:sec2"]
        ids = [n.node_id for n in nodes]
        store.upsert_document("paper", "h2", nodes, (ids, unit_rows(rng, len(ids))))
        assert store.get_nodes(ids) == {n.node_id: n for n in nodes}
        assert store.document_versions() == {"paper": "h2"}


def test_failure_inside_apply_changes_keeps_previous_state(corpus):
    store, docs, vectors = corpus
    before = store.document_versions()
    query = vectors["doc1"]["doc1:sec1:p1:s1"]
    hits_before = store.search(query, k=20)
    rng = np.random.default_rng(9)
    extra = synthetic_doc("doc9", 1, 2, 2)

    def upserts():
        yield DocumentUpsert("doc9", "v1", extra, random_vectors(extra, rng))
        yield DocumentUpsert("doc0", "v2", docs["doc0"][:5], random_vectors(docs["doc0"][:5], rng))
        raise RuntimeError("crash in the middle of the change set")

    with pytest.raises(RuntimeError, match="crash"):
        store.apply_changes(upserts(), deletes=["doc1", "doc3"])
    assert store.document_versions() == before
    assert store.search(query, k=20) == hits_before
    assert raw_counts(store.path, "doc9")["nodes"] == 0
    # A bad vector in the second document also undoes the first one.
    bad = random_vectors(extra, rng) | {"doc9:sec1:p1": np.zeros(DIM)}
    with pytest.raises(ValueError, match=r"'doc9'.*'doc9:sec1:p1' is zero"):
        store.apply_changes(
            [
                DocumentUpsert(
                    "doc8", "v1", synthetic_doc("doc8", 1, 1, 1), random_vectors(synthetic_doc("doc8", 1, 1, 1), rng)
                ),
                DocumentUpsert("doc9", "v1", extra, bad),
            ],
            [],
        )
    assert store.document_versions() == before
    store.upsert_document("doc9", "v1", extra, random_vectors(extra, rng))  # the store still writes
    assert store.document_versions()["doc9"] == "v1"


def test_killed_process_mid_transaction_leaves_previous_state(corpus):
    """A real crash: a child process dies (os._exit) while its transaction has written a
    large document and deleted two others."""
    store, docs, vectors = corpus
    before = store.document_versions()
    store.close()
    script = textwrap.dedent(
        f"""
        import os, numpy as np
        from pathlib import Path
        from kohaku_rag.stores.vectors import DocumentUpsert, VectorStore
        from tests.stores.test_index import synthetic_doc, random_vectors
        store = VectorStore(Path({str(store.path)!r}), {DIM})
        # A tiny page cache makes SQLite spill uncommitted pages to disk before the kill.
        store._conn.execute("PRAGMA cache_size=20")
        big = synthetic_doc("doc0", 10, 10, 20)
        def upserts():
            yield DocumentUpsert("doc0", "v-crash", big, random_vectors(big, np.random.default_rng(1)))
            os._exit(3)
        store.apply_changes(upserts(), deletes=["doc1", "doc2"])
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 3, result.stderr
    with VectorStore(store.path, DIM) as reopened:
        assert reopened.document_versions() == before
        assert reopened.count("sentence") == 6 * 360
        hits = reopened.search(vectors["doc1"]["doc1:sec2:p3:s4"], kinds=["sentence"], k=1)
        assert hits[0].node_id == "doc1:sec2:p3:s4"


def test_dimension_and_model_mismatch_ask_for_rebuild(tmp_path):
    path = tmp_path / "v.sqlite"
    nodes = synthetic_doc("d", 1, 1, 1)
    with VectorStore(path, DIM, model_id="minilm") as store:
        store.upsert_document("d", "1", nodes, random_vectors(nodes, np.random.default_rng(0)))
        with pytest.raises(ValueError, match=r"node 'd:sec1:p1' has 16 values.*24-dimensional"):
            store.upsert_document("d", "2", nodes, {"d:sec1:p1": np.ones(16)})
        with pytest.raises(ValueError, match="query vector has 16 values"):
            store.search(np.ones(16))
        assert store.document_versions() == {"d": "1"}
    with pytest.raises(IndexMismatchError, match=r"24-dimensional vectors but the embedder gives 384.*rebuild"):
        VectorStore(path, 384)
    with pytest.raises(IndexMismatchError, match=r"built with embedder 'minilm', not 'e5-small'.*rebuild"):
        VectorStore(path, DIM, model_id="e5-small")
    with VectorStore(path, DIM) as store:  # no model given: the dimension check alone
        assert store.count("sentence") == 1


def test_bad_documents_are_refused_by_name(tmp_path):
    rng = np.random.default_rng(0)
    a = synthetic_doc("a", 1, 1, 2)
    with VectorStore(tmp_path / "v.sqlite", DIM) as store:
        with pytest.raises(ValueError, match=r"document 'b': node 'a' belongs to document 'a'"):
            store.upsert_document("b", "1", a, {})
        with pytest.raises(ValueError, match=r"document 'a': vector for unknown node 'a:sec9'"):
            store.upsert_document("a", "1", a, {"a:sec9": np.ones(DIM)})
        with pytest.raises(ValueError, match="appears more than once"):
            store.apply_changes([DocumentUpsert("a", "1", a, random_vectors(a, rng))], ["a"])
        assert store.document_versions() == {}


# ---- BM25 ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Accuracy rose to 85.5%.", ["accuracy", "rose", "85.5%", "85.5"]),
        ("It emitted 552 tCO2e", ["emitted", "552", "tco2e"]),
        ("about 1,000 GPUs and 2,500,000.5 hours", ["1000", "gpu", "2500000.5", "hour"]),
        ("costs $2.51 per kWh", ["cost", "$2.51", "2.51", "per", "kwh"]),
        ("CO2 and CO₂ emissions", ["co2", "co2", "emission"]),
        ("GPT-3 ran on A100 chips", ["gpt-3", "gpt", "3", "ran", "a100", "chip"]),
        ("e.g. the U.S. grid, i.e. coal", ["u.s", "grid", "coal"]),
        ("gCO2/kWh", ["gco2/kwh", "gco2", "kwh"]),
        ("Fig. 3 shows the model's batteries.", ["fig", "3", "show", "model", "battery"]),
        ("The class status analysis does this", ["class", "status", "analysis"]),
    ],
)
def test_tokenize(text, expected):
    assert tokenize(text) == expected


def test_tokenize_without_stemming_keeps_plurals():
    assert tokenize("GPUs emissions batteries", stem=False) == ["gpus", "emissions", "batteries"]


PARAGRAPHS = [
    "Training GPT-3 consumed 1,287 MWh of electricity and emitted 552 tCO2e.",
    "The A100 GPU draws 400 W; the V100 draws 300 W under full load.",
    "Data centers in the U.S. used about 2% of national electricity in 2020.",
    "Carbon intensity of the grid varies from 20 to 800 gCO2/kWh by region.",
    "We report energy in kWh and emissions in tCO2e for every training run.",
    "Inference dominates lifetime emissions for popular models, e.g. chat assistants.",
    "Water usage effectiveness (WUE) measures liters per kWh of IT energy.",
    "Power usage effectiveness (PUE) of hyperscale data centers is about 1.1.",
    "Google reported a PUE of 1.10 across its fleet in 2022.",
    "BLOOM training emitted 25 tCO2e, far less than GPT-3 because of a low-carbon grid.",
    "Electricity prices were $0.12 per kWh on average.",
    "Embodied emissions of GPUs are rarely reported by vendors.",
]


def small_index(**params) -> tuple[BM25Index, list[list[str]]]:
    rows = [(f"n{i}", f"d{i % 3}", tokenize(t)) for i, t in enumerate(PARAGRAPHS)]
    return build(rows, **params), [list(r[2]) for r in rows]


@pytest.mark.parametrize("params", [{}, {"k1": 1.2, "b": 0.5, "epsilon": 0.1}])
@pytest.mark.parametrize(
    "query",
    [
        "GPT-3 training emissions tCO2e",
        "PUE of data centers",
        "kWh kWh electricity price",  # repeated terms count twice, as in rank_bm25
        "unknown words only zebra",
        "A100 GPUs power 400 W",
    ],
)
def test_bm25_scores_equal_rank_bm25(params, query):
    index, corpus = small_index(**params)
    okapi = BM25Okapi(corpus, **params)
    tokens = tokenize(query)
    expected = okapi.get_scores(tokens)
    np.testing.assert_array_equal(index.scores(tokens), expected)  # bit-identical
    matched = [i for i, doc in enumerate(corpus) if set(doc) & set(tokens)]
    ranked = sorted(matched, key=lambda i: (-expected[i], i))[:4]
    assert index.search(query, k=4) == [(f"n{i}", expected[i]) for i in ranked]


def test_bm25_idf_equals_rank_bm25_for_rare_terms():
    index, corpus = small_index()
    okapi = BM25Okapi(corpus)
    rare = min(okapi.idf, key=lambda t: -okapi.idf[t])
    assert index.idf(rare) == pytest.approx(okapi.idf[rare])
    assert index.idf("zebra") == 0.0
    assert all(index.idf(t) > 0 for t in okapi.idf)  # common terms are floored, never negative


def test_bm25_doc_filter_and_empty_cases():
    index, _ = small_index()
    hits = index.search("emissions tCO2e GPUs", k=10, doc_ids={"d1"})
    assert hits and all(int(node_id[1:]) % 3 == 1 for node_id, _ in hits)
    assert index.search("emissions", k=10, doc_ids=[]) == []
    assert index.search("the of and", k=5) == []
    assert build([]).search("anything", k=3) == []
    twins = build([(f"t{i}", "d", ["twin", "words"]) for i in range(6)] + [("x", "d", ["other"])])
    assert [node_id for node_id, _ in twins.search("twin", k=3)] == ["t0", "t1", "t2"]  # ties: row order
    with pytest.raises(ValueError, match="distinct node ids"):
        build([("n1", "d", ["a"]), ("n1", "d", ["b"])])


def test_bm25_save_load_round_trip(tmp_path):
    index, _ = small_index(k1=1.3, b=0.6, stem=True)
    path = tmp_path / "index" / "bm25.npz"
    index.save(path)
    loaded = BM25Index.load(path)
    assert (loaded.k1, loaded.b, loaded.epsilon, loaded.stem) == (1.3, 0.6, 0.25, True)
    for query in ("GPT-3 emissions", "PUE 1.1", "$0.12 per kWh"):
        assert loaded.search(query, k=5) == index.search(query, k=5)
    assert [p.name for p in path.parent.iterdir()] == ["bm25.npz"]  # no temporary left behind
    path.write_bytes(b"not an index")
    with pytest.raises(ValueError, match=r"bm25.npz: not a readable BM25 index"):
        BM25Index.load(path)


def test_paragraph_rows_use_paragraphs_only():
    nodes = synthetic_doc("d", 1, 2, 2)
    rows = paragraph_rows(nodes)
    assert [r[0] for r in rows] == ["d:sec1:p1", "d:sec1:p2"]
    assert rows[0][2] == ["text", "d", "sec1", "p1"]


def test_flat_chunks_respect_size_and_words():
    text = "  Energy use of\nlarge models " * 40 + "x" * 25 + " tail"
    chunks = flat_chunks(text, size=50)
    assert all(0 < len(c) <= 50 for c in chunks)
    assert " ".join(chunks) == " ".join(text.split())  # nothing lost, words never split
    assert flat_chunks("a" * 120, size=50) == ["a" * 50, "a" * 50, "a" * 20]
    assert flat_chunks("   ") == []
    with pytest.raises(ValueError, match="chunk size"):
        flat_chunks("x", size=0)
