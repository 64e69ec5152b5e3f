"""Latency of the two search indexes at corpus scale; prints one line per measurement.

    python bench/indexing/index_latency.py                      # 100k and 500k sentence vectors, 50k BM25 paragraphs
    python bench/indexing/index_latency.py --rows 20000 --paragraphs 5000   # quick

Vectors are random unit rows (brute-force KNN cost does not depend on the data); the
synthetic documents have 1,500 sentences and 300 paragraphs each, like the target corpus
(320 documents). BM25 paragraphs draw words from a Zipf distribution.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from rank_bm25 import BM25Okapi

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # runs from a checkout, uninstalled

from kohaku_rag.document.tree import Node, NodeKind  # noqa: E402
from kohaku_rag.stores.bm25 import BM25Index  # noqa: E402
from kohaku_rag.stores.vectors import DocumentUpsert, VectorStore  # noqa: E402

SENTENCES_PER_DOC = 1500
SENTENCES_PER_PARAGRAPH = 5


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(median wall, median CPU) seconds over `repeat` calls after one warm-up call. CPU
    time is this process only, so it stays honest when other jobs share the cores."""
    fn()
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def ms(seconds: tuple[float, float]) -> str:
    return f"median {seconds[0] * 1000:.1f} ms wall, {seconds[1] * 1000:.1f} ms CPU"


def synthetic_doc(doc_id: str, n_sentences: int) -> list[Node]:
    nodes = [Node(doc_id, doc_id, None, NodeKind.DOCUMENT, 0, doc_id, "")]
    sid = f"{doc_id}:sec1"
    nodes.append(Node(sid, doc_id, doc_id, NodeKind.SECTION, 1, "", ""))
    for j in range(1, n_sentences // SENTENCES_PER_PARAGRAPH + 1):
        pid = f"{sid}:p{j}"
        nodes.append(Node(pid, doc_id, sid, NodeKind.PARAGRAPH, j, "", f"paragraph {pid}"))
        for k in range(1, SENTENCES_PER_PARAGRAPH + 1):
            nodes.append(Node(f"{pid}:s{k}", doc_id, pid, NodeKind.SENTENCE, k, "", f"sentence {pid}:s{k}"))
    return nodes


def unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def bench_vectors(workdir: Path, rows: int, dim: int, queries: int) -> None:
    rng = np.random.default_rng(0)
    n_docs = max(1, rows // SENTENCES_PER_DOC)
    path = workdir / f"vectors_{rows}.sqlite"
    start = time.perf_counter()
    with VectorStore(path, dim) as store:
        for first in range(0, n_docs, 20):  # 20 documents per transaction
            batch = []
            for d in range(first, min(first + 20, n_docs)):
                nodes = synthetic_doc(f"doc{d}", SENTENCES_PER_DOC)
                ids = [n.node_id for n in nodes]
                batch.append(DocumentUpsert(f"doc{d}", "v1", nodes, (ids, unit_rows(rng, len(ids), dim))))
            store.apply_changes(batch, [])
        build_s = time.perf_counter() - start
        n_sent, n_par = store.count("sentence"), store.count("paragraph")
        size_mb = path.stat().st_size / 1e6
        print(
            f"vectors rows={n_sent} sentences + {n_par} paragraphs, dim={dim}: build {build_s:.1f} s, file {size_mb:.0f} MB"
        )
        qs = iter(unit_rows(rng, 10 * queries + 10, dim))
        some_docs = [f"doc{d}" for d in range(0, n_docs, max(1, n_docs // 10))][:10]
        cases: dict[str, Callable[[], object]] = {
            "search sentence k=10": lambda: store.search(next(qs), kinds=["sentence"], k=10),
            "search paragraph k=10": lambda: store.search(next(qs), kinds=["paragraph"], k=10),
            "search sentence+paragraph k=10": lambda: store.search(next(qs), k=10),
            "search sentence+paragraph k=100": lambda: store.search(next(qs), k=100),
            f"search sentence+paragraph k=10, {len(some_docs)} docs": lambda: store.search(
                next(qs), k=10, doc_ids=some_docs
            ),
            "count(sentence)": lambda: store.count("sentence"),
        }
        for name, fn in cases.items():
            print(f"  {name}: {ms(timed(fn, queries))}")
        nodes = synthetic_doc("doc0", SENTENCES_PER_DOC)
        ids = [n.node_id for n in nodes]
        matrix = unit_rows(rng, len(ids), dim)
        took = timed(lambda: store.upsert_document("doc0", "v2", nodes, (ids, matrix)), 3)
        print(f"  upsert one document ({len(ids)} nodes, replacing it): {ms(took)}")


def bench_bm25(workdir: Path, paragraphs: int, queries: int) -> None:
    rng = np.random.default_rng(0)
    vocab = 60_000
    p = 1 / np.arange(1, vocab + 1) ** 1.07
    p /= p.sum()
    lengths = rng.integers(40, 160, paragraphs)
    words = rng.choice(vocab, size=int(lengths.sum()), p=p)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    corpus = [[f"w{w}" for w in words[bounds[i] : bounds[i + 1]]] for i in range(paragraphs)]
    rows = [(f"n{i}", f"d{i // 300}", toks) for i, toks in enumerate(corpus)]
    start = time.perf_counter()
    index = BM25Index.build(rows)
    print(f"bm25 paragraphs={paragraphs}: build {time.perf_counter() - start:.1f} s")
    okapi = BM25Okapi(corpus)
    query_tokens = [[f"w{w}" for w in rng.choice(vocab, size=8, p=p)] for _ in range(queries)]
    it = iter(query_tokens * 3)
    print(f"  rank_bm25 get_scores (8 terms): {ms(timed(lambda: okapi.get_scores(next(it)), queries - 1))}")
    it = iter(query_tokens * 3)
    print(
        f"  BM25Index.search (8 terms, k=10): {ms(timed(lambda: index.search(' '.join(next(it)), k=10), queries - 1))}"
    )
    worst_diff = max(float(np.abs(index.scores(q) - okapi.get_scores(q)).max()) for q in query_tokens[:5])
    print(f"  max |score - rank_bm25 score| over 5 queries: {worst_diff:.1e}")
    path = workdir / "bm25.npz"
    index.save(path)
    print(f"  file {path.stat().st_size / 1e6:.0f} MB, load: {ms(timed(lambda: BM25Index.load(path), 3))}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 500_000], help="sentence vectors")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--paragraphs", type=int, default=50_000, help="BM25 paragraphs")
    parser.add_argument("--queries", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kohaku-bench-") as tmp:
        bench_bm25(Path(tmp), args.paragraphs, args.queries)
        for rows in args.rows:
            bench_vectors(Path(tmp), rows, args.dim, args.queries)


if __name__ == "__main__":
    main()
