"""Ranking the units several queries found: reciprocal-rank fusion or interleaving per
query, HERO's content types and cross-encoder step, KohakuRAG's cross-query rerank, query
shares, and dedup over the tree."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kohaku_rag.document.table_record import TABLE_LABEL
from kohaku_rag.document.tree import Node
from kohaku_rag.retrieval.context import IMAGE_ATTACHMENTS
from kohaku_rag.retrieval.rerankers import Reranker
from kohaku_rag.retrieval.retrieval_config import DEFAULT_ALPHA, RERANKS, RetrievalConfig

_TABLE_CAPTION = re.compile(rf"^\s*{TABLE_LABEL}", re.I)
_FIGURE_CAPTION = re.compile(r"^\s*(figure|fig\.)\s*[0-9]+\b", re.I)
_NUMBER = re.compile(r"[-+$€£]?\d[\d.,]*%?[x×]?")


@dataclass(frozen=True)
class UnitScore:
    node_id: str
    score: float  # best (weighted) score over queries
    frequency: float  # (weighted) number of queries that found the unit
    total: float = 0.0  # (weighted) sum of its scores over the queries that found it


def fuse_query(ranked_lists: Sequence[tuple[Sequence[str], float]], rrf_k: float) -> dict[str, float]:
    """Weighted reciprocal-rank fusion of several ranked id lists for one query."""
    fused: dict[str, float] = defaultdict(float)
    for ids, weight in ranked_lists:
        for rank, node_id in enumerate(ids, start=1):
            fused[node_id] += weight / (rrf_k + rank)
    return dict(fused)


def interleave(ranked_lists: Sequence[Sequence[str]], rrf_k: float) -> dict[str, float]:
    """Marikarp's sparse/dense merge: the lists' first items in list order, then their
    second items, ..., repeats dropped; a unit scores 1 / (rrf_k + its merged position)."""
    merged: dict[str, float] = {}
    for depth in range(max((len(ids) for ids in ranked_lists), default=0)):
        for ids in ranked_lists:
            if depth < len(ids) and ids[depth] not in merged:
                merged[ids[depth]] = 1.0 / (rrf_k + len(merged) + 1)
    return merged


def content_type(node: Node) -> str:
    """HERO's content types: "table" (a table node; in text-only payloads, a paragraph
    opening with a table caption or mostly numbers), "figure" (a figure node: caption and
    OCR text; or a paragraph opening with a figure caption), else "text"."""
    if node.attachment == "table":
        return "table"
    if node.attachment in IMAGE_ATTACHMENTS:  # a figure, or a page rendering (page_images)
        return "figure"
    if _TABLE_CAPTION.match(node.text):
        return "table"
    if _FIGURE_CAPTION.match(node.text):
        return "figure"
    words = node.text.split()
    if len(words) >= 10 and sum(bool(_NUMBER.fullmatch(w)) for w in words) >= 0.3 * len(words):
        return "table"
    return "text"


def type_weight(kind: str, cfg: RetrievalConfig) -> float:
    return {"table": cfg.type_weight_table, "figure": cfg.type_weight_figure}.get(kind, cfg.type_weight_text)


def rerank_top(
    units: Sequence[str], texts: Mapping[str, str], query: str, reranker: Reranker, top_n: int, chars: int
) -> tuple[list[str], dict[str, float]]:
    """HERO's cross-encoder step: the best `top_n` units reordered by `reranker` (each cut
    to `chars`), the rest after them in their order. Returns the order and the scores."""
    head = [u for u in units[:top_n] if u in texts]
    scores = reranker.scores(query, [texts[u][:chars] for u in head])
    by_score = dict(zip(head, scores, strict=True))
    ordered = sorted(head, key=lambda u: -by_score[u])  # stable: ties keep the fused order
    return ordered + [u for u in units if u not in by_score], by_score


def rerank(
    per_query: Sequence[Mapping[str, float]],
    strategy: str,
    alpha: float | None = None,
    weights: Sequence[float] | None = None,
) -> list[UnitScore]:
    """KohakuRAG's cross-query rerank of units found by several queries.

    `weights` (one per query, default 1) scale a query's scores and its vote in the
    frequency, so planned rewrites can count for less than the question itself.
    `alpha` None is the strategy's default (DEFAULT_ALPHA). Strategies:

    * combined (KohakuRAG, `pipeline._rerank_matches`):
      alpha × freq / max freq + (1 − alpha) × total / max total, total being the sum of
      a unit's scores over the queries (max floored at 1 and 0.001 as there);
    * combined_max (ours): alpha × freq / Σ weights + (1 − alpha) × best / top best;
    * frequency: (freq, total), as KohakuRAG;
    * score_sum: total (KohakuRAG's "score"); score: (best, freq) (ours, kept by that name);
    * none: first appearance over the queries in order (no rerank, repeats merged).

    Equal keys keep the order of first appearance.
    """
    if strategy not in RERANKS:
        raise ValueError(f"unknown rerank {strategy!r}; use one of {', '.join(RERANKS)}")
    weights = list(weights) if weights is not None else [1.0] * len(per_query)
    best: dict[str, float] = {}
    total: dict[str, float] = defaultdict(float)
    freq: dict[str, float] = defaultdict(float)
    for scores, weight in zip(per_query, weights, strict=True):
        for node_id, score in scores.items():
            best[node_id] = max(best.get(node_id, 0.0), weight * score)
            total[node_id] += weight * score
            freq[node_id] += weight
    units = [UnitScore(n, best[n], freq[n], total[n]) for n in best]
    if not units or strategy == "none":
        return units
    a = alpha if alpha is not None else DEFAULT_ALPHA.get(strategy, 0.0)

    def key(u: UnitScore) -> tuple[float, ...]:
        if strategy == "frequency":
            return (u.frequency, u.total)
        if strategy == "score_sum":
            return (u.total,)
        if strategy == "score":
            return (u.score, u.frequency)
        if strategy == "combined":
            max_freq = max(max(v.frequency for v in units), 1.0)
            max_total = max(max(v.total for v in units), 0.001)
            return (a * u.frequency / max_freq + (1 - a) * u.total / max_total,)
        top_score = max(v.score for v in units) or 1.0
        n_queries = sum(weights) or 1.0
        return (a * u.frequency / n_queries + (1 - a) * u.score / top_score, u.score)

    return sorted(units, key=key, reverse=True)


def with_query_shares(
    ranked: Sequence[UnitScore], per_query: Sequence[Mapping[str, float]], share: int
) -> list[UnitScore]:
    """The reranked units with every query's best `share` units moved up, right after the
    first unit, in query order (a sub-query per entity keeps its evidence)."""
    if not ranked:
        return []
    by_id = {u.node_id: u for u in ranked}
    head: dict[str, None] = {ranked[0].node_id: None}
    for scores in per_query:
        for node_id in sorted(scores, key=lambda n: -scores[n])[:share]:
            head.setdefault(node_id, None)
    return [by_id[n] for n in head if n in by_id] + [u for u in ranked if u.node_id not in head]


def is_ancestor(ancestor: str, node_id: str) -> bool:
    return node_id.startswith(ancestor + ":")


def dedup(node_ids: Sequence[str], mode: str) -> list[str]:
    """`node_id` drops repeats; `tree` also drops a unit whose ancestor or descendant is kept
    (the earlier, better-ranked one wins)."""
    kept: list[str] = []
    for node_id in node_ids:
        if mode != "none" and node_id in kept:
            continue
        if mode == "tree" and any(is_ancestor(k, node_id) or is_ancestor(node_id, k) for k in kept):
            continue
        kept.append(node_id)
    return kept
