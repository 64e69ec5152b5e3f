"""A lexical reranker: BM25 of each passage for the query, with the index's own IDF.

An offline `Reranker` (retrieval/rerankers.py's protocol) that needs no model: on a corpus
where keyword search beats the bundled embedder (WattBot with MiniLM: BM25 alone 0.806
evidence recall at 4K, dense alone 0.548), it ranks a query's candidates the way the
retriever's strongest signal would, so an LLM-written query (Marikarp's knowledge
elements) can reorder them without a cross-encoder.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from kohaku_rag.stores.bm25 import BM25Index, tokenize

__all__ = ["Bm25Reranker"]


class Bm25Reranker:
    """Okapi BM25 over the given passages: the index's IDF and k1/b, the passages' own mean
    length (the candidates are the collection being ranked)."""

    def __init__(self, index: BM25Index) -> None:
        self.index = index

    def scores(self, query: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        terms = tokenize(query, stem=self.index.stem)
        idf = {t: self.index.idf(t) for t in set(terms)}
        docs = [Counter(tokenize(p, stem=self.index.stem)) for p in passages]
        lengths = [sum(d.values()) for d in docs]
        mean = (sum(lengths) / len(lengths)) or 1.0
        k1, b = self.index.k1, self.index.b
        out = []
        for doc, length in zip(docs, lengths, strict=True):
            norm = k1 * (1 - b + b * length / mean)
            out.append(sum(idf[t] * doc[t] * (k1 + 1) / (doc[t] + norm) for t in terms if doc[t]))
        return out
