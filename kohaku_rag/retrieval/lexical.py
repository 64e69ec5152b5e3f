"""Lexical levers over the paragraph BM25, each off by default:

* RM3 pseudo-relevance feedback: the query's terms plus the terms that weigh most in its
  first-pass top paragraphs (each paragraph's term distribution weighted by its share of the
  BM25 score), mixed as lambda x the query + (1 - lambda) x the feedback model.
* A title/section field (BM25F-style): a paragraph's score adds `field_weight` x the BM25
  score of its document title and section heading, scored over the distinct headings (so a
  title shared by a document's hundreds of paragraphs keeps its IDF); only paragraphs whose
  body matches the query are ranked, the field reorders them.
* A fixed-size passage index: every document's paragraphs as one token stream cut into
  overlapping passages (~256 tokens), searched with BM25; a passage stands for the
  paragraphs it covers (most-covered first). Equal-length rows take BM25's length
  normalisation out of the ranking, which varied paragraph lengths skew.

The field and passage indexes are built in memory from the lake's paragraphs the first time
a config asks for them (a few seconds for the WattBot corpus), not stored.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kohaku_rag.document.tree import Node
from kohaku_rag.stores.bm25 import BM25Index, tokenize

_ORDER = re.compile(r":sec(\d+):p(\d+)$")


def rm3_weights(
    query_tokens: Sequence[str],
    feedback: Sequence[tuple[Sequence[str], float]],
    n_terms: int,
    query_weight: float,
    idf: Callable[[str], float],
) -> dict[str, float]:
    """RM3's expanded query: term -> weight. `feedback` holds the first-pass top paragraphs'
    tokens with their BM25 scores. A term's feedback weight is sum over paragraphs of
    P(term | paragraph) x the paragraph's share of the scores; the `n_terms` best (ranked
    by that weight x IDF, so words every paragraph uses do not crowd out the topic's) are
    kept, renormalised, and mixed with the query's own distribution."""
    query = Counter(query_tokens)
    if not query:
        return {}
    original = {t: c / sum(query.values()) for t, c in query.items()}
    total = sum(max(score, 0.0) for _, score in feedback)
    model: dict[str, float] = {}
    for tokens, score in feedback:
        if not tokens or total <= 0:
            continue
        share = max(score, 0.0) / total
        for term, count in Counter(tokens).items():
            model[term] = model.get(term, 0.0) + share * count / len(tokens)
    best = sorted(model, key=lambda t: -model[t] * idf(t))[:n_terms]
    kept = sum(model[t] for t in best)
    out = {t: query_weight * w for t, w in original.items()}
    for term in best:
        out[term] = out.get(term, 0.0) + (1.0 - query_weight) * model[term] / kept
    # Scaled so a query term alone weighs as in plain BM25 (one count per occurrence).
    scale = sum(query.values())
    return {t: w * scale for t, w in out.items() if w > 0}


def paragraph_order(node_id: str) -> tuple[int, int]:
    """(section, paragraph) numbers of a paragraph id "doc:secI:pJ", for reading order."""
    m = _ORDER.search(node_id)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


@dataclass(frozen=True, eq=False)
class FieldIndex:
    """BM25 over the distinct "document title › section heading" strings, and which of them
    each paragraph row of the body index has."""

    index: BM25Index
    field_of_row: np.ndarray  # (n body rows,) int: row of `index`, -1 for none

    @classmethod
    def build(cls, body: BM25Index, heading: Mapping[str, str]) -> FieldIndex:
        """`heading`: paragraph id -> its title and section heading as one string."""
        strings: dict[str, int] = {}
        of_row = np.full(len(body), -1, dtype=np.int64)
        for row, node_id in enumerate(body.node_ids.tolist()):
            text = heading.get(node_id, "").strip()
            if text:
                of_row[row] = strings.setdefault(text, len(strings))
        rows = [(f"f{i}", "", tokenize(text, stem=body.stem)) for text, i in strings.items()]
        return cls(BM25Index.build(rows, stem=body.stem), of_row)

    def row_scores(self, query_tokens: Sequence[str]) -> np.ndarray:
        """Each body row's field score for the query (0 where it has no heading)."""
        if len(self.index) == 0:
            return np.zeros(len(self.field_of_row))
        scores = self.index.scores(query_tokens)
        out = np.where(self.field_of_row >= 0, scores[np.maximum(self.field_of_row, 0)], 0.0)
        return np.asarray(out, dtype=np.float64)


@dataclass(frozen=True, eq=False)
class PassageIndex:
    """BM25 over fixed-size overlapping token passages of each document's paragraphs."""

    index: BM25Index
    covers: tuple[tuple[str, ...], ...]  # passage row -> paragraph ids, most-covered first

    @classmethod
    def build(cls, paragraphs: Sequence[Node], size: int, overlap: int, stem: bool = True) -> PassageIndex:
        if size < 16 or not 0 <= overlap < size:
            raise ValueError(f"passages need size >= 16 and 0 <= overlap < size, got {size} and {overlap}")
        by_doc: dict[str, list[Node]] = {}
        for node in paragraphs:
            by_doc.setdefault(node.doc_id, []).append(node)
        rows: list[tuple[str, str, Sequence[str]]] = []
        covers: list[tuple[str, ...]] = []
        for doc_id, nodes in by_doc.items():
            tokens: list[str] = []
            owner: list[str] = []
            for node in sorted(nodes, key=lambda n: paragraph_order(n.node_id)):
                words = tokenize(node.text, stem=stem)
                tokens += words
                owner += [node.node_id] * len(words)
            start = 0
            while start < len(tokens):
                span = owner[start : start + size]
                counts = Counter(span)
                covers.append(tuple(sorted(counts, key=lambda p: (-counts[p], span.index(p)))))
                rows.append((f"{doc_id}#{len(covers) - 1}", doc_id, tokens[start : start + size]))
                if start + size >= len(tokens):
                    break
                start += size - overlap
        return cls(BM25Index.build(rows, stem=stem), tuple(covers))

    def paragraphs(self, query: str, k: int) -> list[str]:
        """The paragraphs of the query's best `k` passages, in passage rank order."""
        if len(self.index) == 0:
            return []
        out: dict[str, None] = {}
        for passage_id, _score in self.index.search(query, k):
            for paragraph in self.covers[int(passage_id.rsplit("#", 1)[1])]:
                out.setdefault(paragraph, None)
        return list(out)
