"""Retrieval settings shared by `kohaku search` and the answering pipeline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class RetrievalConfig:
    """Retrieval settings shared by `kohaku search` and the answering pipeline."""

    top_k: int = 24  # dense hits per query and per kind (k applies after the kind filter)
    bm25_top_k: int = 24  # BM25 paragraph hits per query (0 disables BM25)
    top_k_final: int = 16  # context units kept after the cross-query rerank (~8,000 characters)
    rerank: Literal["frequency", "score", "combined"] = "combined"
    # "combined" ranks by alpha × (weighted) query frequency + (1 − alpha) × best score.
    alpha: float = 0.25
    # Weight of every query after the first (the planner's rewrites) against the question
    # itself, in score and frequency. Measured on WattBot train at the answering budget
    # (bench/qa_context.py): the bundled 1.5B planner's rewrites at full weight cut evidence
    # recall from 0.84 to 0.77; at 0.25 (with alpha 0.25) they add recall without displacing
    # the question's own hits.
    planned_query_weight: float = 0.25
    # Dense and BM25 hits are fused by weighted reciprocal rank. Tuned on WattBot train
    # (bench/index_wattbot.py): with the bundled MiniLM, dense retrieval alone is far weaker
    # than BM25, and an equal-weight hybrid loses to BM25; as a light tie-breaker over BM25
    # (0.1) it adds evidence recall. Raise dense_weight for a stronger embedder.
    rrf_k: float = 60.0
    bm25_weight: float = 1.0
    dense_weight: float = 0.1
    # Kinds searched densely, each on its own (k applies after the kind filter). Paragraph
    # vectors are the length-weighted means of their sentences; adding sentence hits
    # ("sentence", "paragraph") measured no better on WattBot train and costs 4x the time.
    dense_kinds: tuple[str, ...] = ("paragraph",)
    expand_to: Literal["paragraph", "section"] = "paragraph"
    dedup: Literal["none", "node_id", "tree"] = "tree"
    threshold: float = 0.0  # minimum dense cosine similarity for a dense hit to count
    budget_chars: int = 4000
    # Mark this many sentences of the context, those sharing the most (IDF-weighted) question
    # terms, so a small answering model finds the evidence inside long paragraphs (0: off).
    # With the bundled 1.5B model on WattBot train (single run): WattBot score 0.541 → 0.577.
    mark_sentences: int = 2
