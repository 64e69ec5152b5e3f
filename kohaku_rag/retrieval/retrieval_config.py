"""Retrieval settings shared by `kohaku search` and the answering pipeline.

KohakuRAG's published retrieval (`RetrievalConfig.published()`): dense search over sentences
and paragraphs together, per-query similarity scores, the cross-query "combined" rerank
(0.4 × frequency / max frequency + 0.6 × summed similarity / max summed similarity), node
dedup before the cut, BM25 hits appended after the dense ones. The defaults here are the
variants that measured better on WattBot train with the bundled models (see the README's
"Published settings vs the default"): BM25 fused with a light dense tie-breaker by RRF and
the "combined_max" rerank.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated, Literal

from kohaku_rag.config_files import Range
from kohaku_rag.retrieval.rerankers import RerankerSpec

CONTENTS = ("all", "text")
PACKS = ("paragraphs", "windows")
RERANKS = ("combined", "combined_max", "frequency", "score", "score_sum", "none")
# The alpha of each combined rerank when `alpha` is not given: KohakuRAG's 0.4 for its
# formula; 0.25 for ours (measured with the planner's weighted rewrites, bench/retrieval/qa_context.py).
DEFAULT_ALPHA = {"combined": 0.4, "combined_max": 0.25}
# sqlite-vec refuses a larger k (stores.vectors.MAX_K); BM25 and the cuts are bounded alike.
MAX_HITS = 4096
WEIGHT = Range(0.0, 1000.0)
FACTOR = Range(0.0, 1000.0, low_open=True)


@dataclass(frozen=True)
class RetrievalConfig:
    """Retrieval settings shared by `kohaku search` and the answering pipeline."""

    # Dense hits per query and per kind (k applies after the kind filter).
    top_k: Annotated[int, Range(0, MAX_HITS)] = 24
    bm25_top_k: Annotated[int, Range(0, MAX_HITS)] = 24  # BM25 paragraph hits per query (0 disables BM25)
    # Context units kept after the cross-query rerank and dedup (~8,000 characters);
    # None keeps every unit (the budget still applies).
    top_k_final: Annotated[int, Range(1, MAX_HITS)] | None = 16
    # Cross-query rerank of the units the queries found:
    #   "combined"      KohakuRAG's: alpha × freq / max freq + (1 − alpha) × score / max score,
    #                   a unit's score being the sum of its scores over the queries (alpha 0.4)
    #   "combined_max"  ours (the default): alpha × freq / n queries + (1 − alpha) × best
    #                   score / top best score (alpha 0.25)
    #   "frequency"     by (frequency, summed score), as KohakuRAG
    #   "score_sum"     by summed score (KohakuRAG's "score"); "score": by best score (ours)
    #   "none"          the queries' hits concatenated in query order, first occurrence kept
    # Config files written before "combined" meant KohakuRAG's formula must say which they
    # mean (see qa_config.py); `kohaku config show` prints the resolved value.
    rerank: Literal["combined", "combined_max", "frequency", "score", "score_sum", "none"] = "combined_max"
    alpha: Annotated[float, Range(0.0, 1.0)] | None = None  # None: DEFAULT_ALPHA of the rerank
    # Weight of every query after the first (the planner's rewrites) against the question
    # itself, in score and frequency. Measured on WattBot train at the answering budget
    # (bench/retrieval/qa_context.py): the bundled 1.5B planner's rewrites at full weight cut evidence
    # recall from 0.84 to 0.77; at 0.25 (with alpha 0.25) they add recall without displacing
    # the question's own hits. KohakuRAG weighs every query alike (1.0).
    planned_query_weight: Annotated[float, Range(0.0, 1.0)] = 0.25
    # How BM25 joins dense retrieval: "fuse" (ours) fuses the two ranked lists of each query
    # by weighted reciprocal rank; "append" (KohakuRAG's) ranks the dense hits by their
    # similarity, and adds the BM25 hits not already there after them.
    # Tuned on WattBot train (bench/indexing/index_wattbot.py): with the bundled MiniLM, dense
    # retrieval alone is far weaker than BM25, and an equal-weight hybrid loses to BM25; as a
    # light tie-breaker over BM25 (0.1) it adds evidence recall. Raise dense_weight for a
    # stronger embedder.
    bm25_mode: Literal["fuse", "append"] = "fuse"
    rrf_k: Annotated[float, Range(0.0, 1_000_000.0)] = 60.0
    bm25_weight: Annotated[float, WEIGHT] = 1.0
    dense_weight: Annotated[float, WEIGHT] = 0.1
    # Kinds searched densely. "separate": each kind on its own (k applies after the kind
    # filter); "joint": one search over all of them, k over the union (KohakuRAG's, with
    # ("sentence", "paragraph")). Paragraph vectors are the length-weighted means of their
    # sentences; adding sentence hits measured no better on WattBot train (the README's
    # table) and costs 4x the time, so the default searches paragraphs only.
    dense_kinds: tuple[str, ...] = ("paragraph",)
    dense_search: Literal["separate", "joint"] = "separate"
    expand_to: Literal["paragraph", "section"] = "paragraph"
    # Applied before the top_k_final cut, so a dropped unit's slot goes to the next one.
    dedup: Literal["none", "node_id", "tree"] = "tree"
    threshold: Annotated[float, Range(-1.0, 1.0)] = 0.0  # minimum dense cosine similarity for a dense hit to count
    # The context's characters. 3,000 (~750 tokens) since 2026-11-26: on WattBot train + dev
    # (bench/retrieval/retrieval_sweep.py) the evidence is within 3,000 characters for 0.780 of the
    # questions and within 4,000 for 0.807, and a quarter less prefill is ~1.5 s less per
    # answer on 2 cores (bench/answering/time_to_answer.py, docs/explanation/time-to-answer.md).
    budget_chars: Annotated[int, Range(0, 10_000_000)] = 3000
    # Mark this many sentences of the context, those sharing the most (IDF-weighted) question
    # terms, so a small answering model finds the evidence inside long paragraphs (0: off).
    # With the bundled 1.5B model on WattBot train (single run): WattBot score 0.541 → 0.577.
    mark_sentences: Annotated[int, Range(0, 1000)] = 2
    # Which nodes may enter the context: "all", or "text" to leave out table and figure
    # nodes (HERO's text-only retrieval, without a second index; the answering config can
    # choose it per question type: `content_routing`).
    content: Literal["all", "text"] = "all"
    # A table longer than this many characters enters the context as its caption and the
    # rows sharing the most question terms (in table order), not cut at the budget's edge:
    # a row is only evidence beside the caption that says what its numbers are. None: whole
    # tables (a table cut at the budget's edge is still cut at a row, its record with it).
    table_chars: Annotated[int, Range(200, 10_000_000)] | None = None

    # ── HERO's and Marikarp's retrieval options (the README's "Other winning
    # systems as configs"). Their defaults leave retrieval exactly as above. ──
    # How one query's BM25 and dense lists merge: "rrf" (weighted reciprocal rank, above),
    # or Marikarp's "interleave": BM25's first, dense's first, BM25's second, ... (each
    # list's order kept, repeats dropped); a unit's score is 1 / (rrf_k + its position).
    fusion: Literal["rrf", "interleave"] = "rrf"
    # HERO's content-type weights: a unit's fused score is multiplied by its type's weight
    # (score(d) = sum over lists of w_type(d) * w_list / (k + rank)). Table: a table node, or
    # a paragraph that is a table caption or mostly numbers; figure: a figure node (its
    # caption and OCR text) or a figure caption. HERO: text 1.0, table 2.0, figure 1.8.
    type_weight_text: Annotated[float, FACTOR] = 1.0
    type_weight_table: Annotated[float, FACTOR] = 1.0
    type_weight_figure: Annotated[float, FACTOR] = 1.0
    # HERO's metadata boost: the units of a document whose author surname or publication
    # year (from the corpus's metadata.csv, kept in the lake's `search_aids`) the query names
    # are multiplied by this (HERO: 2.0; 1.0 is off). `metadata_fields` says which count.
    metadata_boost: Annotated[float, FACTOR] = 1.0
    metadata_fields: tuple[Literal["author", "year", "title"], ...] = ("author", "year")
    # HERO's query expansion with the lake's dictionary (abbreviations defined in the
    # documents, a built-in unit list, the corpus's `expansions.csv`): "bm25" adds the long
    # forms (or abbreviations) a query's terms stand for to its BM25 query; "all" also to
    # the dense one; "off" leaves queries as written.
    query_expansion: Literal["off", "bm25", "all"] = "off"
    # HERO's cross-encoder rerank of the fused top-N: `reranker` (None: no rerank; see
    # rerankers.RerankerSpec: a hosted /rerank endpoint, the bundled LLM, the embedder)
    # reorders the best `rerank_top_n` units, each cut to `rerank_passage_chars`, before the
    # top_k_final cut. The reranker's score replaces the fused one within those units.
    reranker: RerankerSpec | None = None
    rerank_top_n: Annotated[int, Range(1, MAX_HITS)] = 50
    rerank_passage_chars: Annotated[int, Range(50, 1_000_000)] = 1200
    # How figures reach the context. "joint": figure nodes compete with text nodes
    # in the one ranking (searched by their image vectors when the index was built with a
    # multimodal embedder, IndexConfig.figure_vectors). "separate": KohakuRAG's image search
    # (`top_k_images`): the ranking leaves figure nodes out, and the `top_k_images` figures
    # closest to the queries by vector join the context after the text, within the budget.
    # `[generation] img_k` then sends the images of the top ones to a vision model.
    figure_search: Literal["joint", "separate"] = "joint"
    top_k_images: Annotated[int, Range(0, MAX_HITS)] = 4

    # ── Issue 25's levers (the README's "More evidence per character"); their defaults
    # leave retrieval exactly as above. ──
    # How the context is packed into the budget: "paragraphs", whole units in rank order;
    # "windows", each unit's `window_sentences` best-matching sentences (IDF-weighted
    # question terms) with `window_neighbours` sentences either side, merged, in document
    # order (retrieval/windows.py); a unit under `window_min_chars` stays whole.
    pack: Literal["paragraphs", "windows"] = "paragraphs"
    window_sentences: Annotated[int, Range(1, 100)] = 2
    window_neighbours: Annotated[int, Range(0, 100)] = 1
    window_min_chars: Annotated[int, Range(0, 10_000_000)] = 400
    # BM25F-style title/section field: a paragraph's BM25 score adds field_weight x the BM25
    # score of its document title and section heading (0: off; retrieval/lexical.py).
    field_weight: Annotated[float, WEIGHT] = 0.0
    # A fixed-size passage index (passage_tokens tokens, passage_overlap shared with the
    # next) fused into each query's RRF with this weight (0: off).
    passage_weight: Annotated[float, WEIGHT] = 0.0
    passage_tokens: Annotated[int, Range(16, 100_000)] = 256
    passage_overlap: Annotated[int, Range(0, 100_000)] = 64
    # RM3 pseudo-relevance feedback for BM25: the rm3_terms best terms of the first pass's
    # top rm3_docs paragraphs join the query, which keeps rm3_query_weight (0 terms: off).
    rm3_terms: Annotated[int, Range(0, 1000)] = 0
    rm3_docs: Annotated[int, Range(1, MAX_HITS)] = 10
    rm3_query_weight: Annotated[float, Range(0.0, 1.0)] = 0.6
    # A per-query share of the context: each planned query's best `query_share` units are
    # kept (right after the question's best unit), so a question combining documents gets
    # every sub-query's evidence, not only the question's (0: the reranked order alone).
    query_share: Annotated[int, Range(0, MAX_HITS)] = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "dense_kinds", tuple(self.dense_kinds))
        object.__setattr__(self, "metadata_fields", tuple(self.metadata_fields))
        for name in ("type_weight_text", "type_weight_table", "type_weight_figure", "metadata_boost"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        weights = (self.type_weight_text, self.type_weight_table, self.type_weight_figure)
        hero_keys = {
            "fusion": self.fusion != "rrf",
            "type_weight_*": weights != (1.0, 1.0, 1.0),
            "metadata_boost": self.metadata_boost != 1.0,
        }
        if self.bm25_mode == "append" and any(hero_keys.values()):
            used = ", ".join(k for k, on in hero_keys.items() if on)
            raise ValueError(f'{used} apply to fused lists: use them with bm25_mode = "fuse", not "append"')
        if self.rerank_top_n < 1 or self.rerank_passage_chars < 50:
            raise ValueError(
                f"rerank_top_n must be >= 1 and rerank_passage_chars >= 50, got {self.rerank_top_n} "
                f"and {self.rerank_passage_chars}"
            )
        for name in ("top_k", "bm25_top_k", "budget_chars", "mark_sentences"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.top_k_final is not None and self.top_k_final < 1:
            raise ValueError(f"top_k_final must be at least 1 (or None for no cut), got {self.top_k_final}")
        if self.rerank not in RERANKS:
            raise ValueError(f"rerank {self.rerank!r} is not one of {', '.join(RERANKS)}")
        if self.alpha is not None and not 0.0 <= self.alpha <= 1.0:
            raise ValueError(f"alpha {self.alpha} is outside [0, 1]")
        if self.alpha is not None and self.rerank not in DEFAULT_ALPHA:
            raise ValueError(f'alpha only applies to rerank "combined" or "combined_max", not {self.rerank!r}')
        if not 0.0 <= self.planned_query_weight <= 1.0:
            raise ValueError(f"planned_query_weight {self.planned_query_weight} is outside [0, 1]")
        unknown = [k for k in self.dense_kinds if k not in DENSE_KINDS]
        if unknown:
            raise ValueError(f"dense_kinds {unknown} are not among {', '.join(DENSE_KINDS)}")
        if self.content not in CONTENTS:
            raise ValueError(f"content {self.content!r} is not one of {', '.join(CONTENTS)}")
        if self.pack not in PACKS:
            raise ValueError(f"pack {self.pack!r} is not one of {', '.join(PACKS)}")
        for name in ("window_sentences", "rm3_docs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in (
            "window_neighbours",
            "window_min_chars",
            "field_weight",
            "passage_weight",
            "rm3_terms",
            "query_share",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.passage_tokens < 16 or not 0 <= self.passage_overlap < self.passage_tokens:
            raise ValueError(
                f"passage_tokens must be >= 16 and 0 <= passage_overlap < passage_tokens, got "
                f"{self.passage_tokens} and {self.passage_overlap}"
            )
        if not 0.0 <= self.rm3_query_weight <= 1.0:
            raise ValueError(f"rm3_query_weight {self.rm3_query_weight} is outside [0, 1]")
        if self.figure_search not in ("joint", "separate"):
            raise ValueError(f'figure_search {self.figure_search!r} is not "joint" or "separate"')
        if self.figure_search == "separate" and not 1 <= self.top_k_images <= 4096:
            raise ValueError(f'figure_search = "separate" needs top_k_images from 1 to 4096, got {self.top_k_images}')
        if self.top_k == 0 and self.bm25_top_k == 0:
            raise ValueError("top_k and bm25_top_k are both 0: nothing would be searched")

    @property
    def effective_alpha(self) -> float:
        return self.alpha if self.alpha is not None else DEFAULT_ALPHA.get(self.rerank, 0.0)

    @classmethod
    def published(cls, **overrides: object) -> RetrievalConfig:
        """KohakuRAG's published retrieval settings (the paper and its WattBot scripts)."""
        settings: dict[str, object] = {
            "rerank": "combined",
            "planned_query_weight": 1.0,
            "bm25_mode": "append",
            "dense_kinds": ("sentence", "paragraph"),
            "dense_search": "joint",
            "dedup": "node_id",
            **overrides,
        }
        return replace(cls(), **settings)  # type: ignore[arg-type]

    @property
    def uses_search_aids(self) -> bool:
        """Whether results depend on the lake's search aids (dictionary, document metadata)."""
        return self.query_expansion != "off" or self.metadata_boost != 1.0


DENSE_KINDS = ("sentence", "paragraph", "section", "document")
