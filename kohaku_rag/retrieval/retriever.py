"""Retrieval core: multi-query hybrid search over the hierarchical index.

For each query, dense hits (sentences and paragraphs, searched separately so k applies
after the kind filter, or jointly as KohakuRAG does) and BM25 paragraph hits are mapped to
paragraph units and fused by reciprocal rank (or, KohakuRAG's way, the dense hits keep their
similarity and BM25 hits are appended after them). Across queries, units are reranked by
frequency, score or both (KohakuRAG's cross-query rerank), expanded to their parent,
deduplicated and cut to `top_k_final`: this module finds the units. Shaping them into the
context (sentence windows, a table's rows, packing into the character budget, evidence
marks) is `context_builder.py`; the context items are `context.py`, fusion and reranking
`ranking.py`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from kohaku_rag.document.tree import Node
from kohaku_rag.embed import make_embedder
from kohaku_rag.embed.base import Embedder
from kohaku_rag.indexing.doc_metadata import matching_documents
from kohaku_rag.indexing.index_config import IndexConfig
from kohaku_rag.indexing.search_aids import SearchAids
from kohaku_rag.lake.layout import Lake
from kohaku_rag.llm import ChatModel, LLMSpec
from kohaku_rag.retrieval.context import (
    IMAGE_ATTACHMENTS,
    MEDIA_ATTACHMENTS,
    ContextItem,
    pack,
    section_heading,
)
from kohaku_rag.retrieval.context_builder import ContextBuilder
from kohaku_rag.retrieval.lexical import FieldIndex, PassageIndex, rm3_weights
from kohaku_rag.retrieval.published import open_published
from kohaku_rag.retrieval.ranking import (
    content_type,
    dedup,
    fuse_query,
    interleave,
    rerank,
    rerank_top,
    type_weight,
    with_query_shares,
)
from kohaku_rag.retrieval.rerankers import Reranker, RerankerSpec, make_reranker
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig
from kohaku_rag.stores.bm25 import BM25Index, tokenize
from kohaku_rag.stores.vectors import VectorStore


class Retriever:
    """Holds the loaded embedder and indexes; open once, query many times."""

    def __init__(
        self,
        embedder: Embedder,
        store: VectorStore,
        bm25: BM25Index | None,
        aids: SearchAids | None = None,
        reranker_for: Callable[[RerankerSpec], Reranker] | None = None,
    ) -> None:
        self.embedder = embedder
        self.store = store
        self.bm25 = bm25
        self.aids = aids  # the lake's expansion dictionary and document metadata
        self._reranker_for = reranker_for or (lambda spec: make_reranker(spec, embedder=embedder))
        self._rerankers: dict[RerankerSpec, Reranker] = {}
        self._titles: dict[str, str] | None = None
        self._types: dict[str, tuple[str, str]] = {}  # unit -> (doc id, content type)
        self._fields: FieldIndex | None = None
        self._passages: dict[tuple[int, int], PassageIndex] = {}
        self.context = ContextBuilder(store, bm25)  # shapes what a search found into the context

    def doc_title(self, doc_id: str, node: Node | None) -> str:
        """The corpus metadata's title, else the document node's (the parsed heading);
        a title that only repeats the id says nothing."""
        if self._titles is None:
            self._titles = {d.doc_id: d.title for d in self.store.documents()}
        for title in (self._titles.get(doc_id, ""), node.title if node else ""):
            if title.strip() and title.strip() != doc_id:
                return title.strip()
        return ""

    def _unit_of(self, node_ids: Sequence[str]) -> list[str]:
        """Sentence hits count for their paragraph; the order of first appearance is kept."""
        units: list[str] = []
        seen: set[str] = set()
        for node_id in node_ids:
            unit = node_id.rsplit(":", 1)[0] if node_id.rsplit(":", 1)[-1].startswith("s") else node_id
            if unit not in seen:
                seen.add(unit)
                units.append(unit)
        return units

    def dense_lists(self, vector: np.ndarray, cfg: RetrievalConfig) -> list[list[tuple[str, float]]]:
        """Ranked (unit, similarity) lists of one query's dense hits: one per kind, or one
        over all kinds (`dense_search = "joint"`). A unit keeps its best hit's similarity."""
        if cfg.top_k <= 0 or not cfg.dense_kinds:
            return []
        groups = [cfg.dense_kinds] if cfg.dense_search == "joint" else [(kind,) for kind in cfg.dense_kinds]
        out = []
        for kinds in groups:
            hits = [h for h in self.store.search(vector, kinds=kinds, k=cfg.top_k) if h.score >= cfg.threshold]
            best: dict[str, float] = {}
            for h in hits:
                unit = self._unit_of([h.node_id])[0]
                best.setdefault(unit, h.score)
            out.append(list(best.items()))
        return out

    def bm25_hits(self, query: str, cfg: RetrievalConfig) -> list[tuple[str, float]]:
        if self.bm25 is None or cfg.bm25_top_k <= 0 or cfg.bm25_weight <= 0:
            return []
        if cfg.rm3_terms == 0 and cfg.field_weight == 0:
            return list(self.bm25.search(query, cfg.bm25_top_k))
        tokens = tokenize(query, stem=self.bm25.stem)
        weights: dict[str, float] = {t: float(c) for t, c in Counter(tokens).items()}
        if cfg.rm3_terms > 0:
            first = self.bm25.search(query, cfg.rm3_docs)
            nodes = self.store.get_nodes([n for n, _ in first])
            feedback = [(tokenize(nodes[n].text, stem=self.bm25.stem), s) for n, s in first if n in nodes]
            weights = rm3_weights(tokens, feedback, cfg.rm3_terms, cfg.rm3_query_weight, self.bm25.idf)
        scores, matched = self.bm25.weighted_scores(weights)
        if cfg.field_weight > 0:
            scores = scores + cfg.field_weight * self.field_index().row_scores(tokens)
        return self.bm25.top(scores, matched, cfg.bm25_top_k)

    # ── the lexical levers: the field and passage indexes, built on first use ──

    def paragraph_nodes(self) -> dict[str, Node]:
        """Every paragraph the BM25 index holds, as stored."""
        assert self.bm25 is not None
        return self.store.get_nodes(self.bm25.node_ids.tolist())

    def field_index(self) -> FieldIndex:
        assert self.bm25 is not None
        if self._fields is None:
            paragraphs = self.paragraph_nodes()
            parents = self.store.get_nodes(
                {p.parent_id for p in paragraphs.values() if p.parent_id} | {p.doc_id for p in paragraphs.values()}
            )
            heading = {
                n: " ".join(
                    (self.doc_title(p.doc_id, parents.get(p.doc_id)), section_heading(parents.get(p.parent_id or "")))
                )
                for n, p in paragraphs.items()
            }
            self._fields = FieldIndex.build(self.bm25, heading)
        return self._fields

    def passage_index(self, cfg: RetrievalConfig) -> PassageIndex:
        key = (cfg.passage_tokens, cfg.passage_overlap)
        if key not in self._passages:
            stem = self.bm25.stem if self.bm25 is not None else True
            nodes = list(self.paragraph_nodes().values()) if self.bm25 is not None else []
            self._passages[key] = PassageIndex.build(nodes, cfg.passage_tokens, cfg.passage_overlap, stem)
        return self._passages[key]

    def query_scores(self, query: str, vector: np.ndarray, cfg: RetrievalConfig) -> dict[str, float]:
        """One query's unit scores: RRF-fused dense and BM25 ranks ("fuse"), or the dense
        similarities alone ("append": BM25 joins after the rerank, in `search`)."""
        if cfg.bm25_mode == "append":
            merged: dict[str, float] = {}
            for ranked in self.dense_lists(vector, cfg):
                for unit, score in ranked:
                    merged[unit] = max(merged.get(unit, float("-inf")), score)
            return merged
        lists: list[tuple[Sequence[str], float]] = []
        if cfg.dense_weight > 0:
            lists += [([unit for unit, _ in ranked], cfg.dense_weight) for ranked in self.dense_lists(vector, cfg)]
        bm25 = self.bm25_hits(self.expanded(query, cfg, "bm25"), cfg)
        if bm25:
            lists.append(([node_id for node_id, _ in bm25], cfg.bm25_weight))
        if cfg.passage_weight > 0 and self.bm25 is not None and cfg.bm25_top_k > 0:
            passages = self.passage_index(cfg).paragraphs(self.expanded(query, cfg, "bm25"), cfg.bm25_top_k)
            if passages:
                lists.append((passages, cfg.passage_weight))
        if cfg.fusion == "interleave":  # BM25's list first: the stronger one here
            return self.boosted(interleave([ids for ids, _ in lists[::-1]], cfg.rrf_k), query, cfg)
        return self.boosted(fuse_query(lists, cfg.rrf_k), query, cfg)

    # ── HERO's options: query expansion, content-type weights, metadata boost ──

    def search_aids(self) -> SearchAids:
        """The lake's aids; a config that needs them on a lake without them is an error,
        not a silent no-op."""
        if self.aids is None:
            raise FileNotFoundError(
                "this config uses query_expansion or metadata_boost, but the lake has no search aids "
                "yet: run `kohaku index` once with this version to assemble them (nothing is re-indexed)"
            )
        return self.aids

    def expanded(self, query: str, cfg: RetrievalConfig, where: str) -> str:
        """The query with the lake's dictionary applied, where the config says so."""
        if cfg.query_expansion == "off" or (where == "dense" and cfg.query_expansion != "all"):
            return query
        return self.search_aids().expansions.expand_query(query)

    def unit_types(self, units: Sequence[str]) -> dict[str, tuple[str, str]]:
        """unit -> (doc id, content type), read once per unit."""
        missing = [u for u in units if u not in self._types]
        if missing:
            for unit, node in self.store.get_nodes(missing).items():
                self._types[unit] = (node.doc_id, content_type(node))
        return {u: self._types[u] for u in units if u in self._types}

    def boosted(self, fused: dict[str, float], query: str, cfg: RetrievalConfig) -> dict[str, float]:
        """Scores times the unit's content-type weight and, for the documents the query
        names (author, year, title), the metadata boost. Identity with the defaults."""
        weights = (cfg.type_weight_text, cfg.type_weight_table, cfg.type_weight_figure)
        named: set[str] = set()
        if cfg.metadata_boost != 1.0:
            named = matching_documents(query, self.search_aids().documents, cfg.metadata_fields)
        if weights == (1.0, 1.0, 1.0) and not named:
            return fused
        types = self.unit_types(list(fused))
        out: dict[str, float] = {}
        for unit, score in fused.items():
            doc_id, kind = types.get(unit, ("", "text"))
            boost = cfg.metadata_boost if doc_id in named else 1.0
            out[unit] = score * type_weight(kind, cfg) * boost
        return out

    def reranker(self, spec: RerankerSpec) -> Reranker:
        if spec not in self._rerankers:
            self._rerankers[spec] = self._reranker_for(spec)
        return self._rerankers[spec]

    def search(self, queries: Sequence[str], cfg: RetrievalConfig) -> list[ContextItem]:
        queries = [q for q in queries if q.strip()]
        if not queries:
            return []
        vectors = self.embedder.embed([self.expanded(q, cfg, "dense") for q in queries], role="query")
        per_query = [self.query_scores(q, v, cfg) for q, v in zip(queries, vectors, strict=True)]
        # The first query is the question; the rest are the planner's rewrites.
        weights = [1.0] + [cfg.planned_query_weight] * (len(queries) - 1)
        ranked = rerank(per_query, cfg.rerank, cfg.alpha, weights)
        if cfg.query_share > 0 and len(per_query) > 1:
            ranked = with_query_shares(ranked, per_query, cfg.query_share)
        scores: dict[str, float] = {}
        targets: list[str] = []
        for unit in ranked:
            target = unit.node_id
            if cfg.expand_to == "section" and target.count(":") >= 2:
                target = target.rsplit(":", 1)[0]
            targets.append(target)
            scores[target] = max(scores.get(target, 0.0), unit.score)
        if cfg.content == "text":  # before the cut, so a table's slot goes to the next text unit
            targets = self.text_units(targets)
        if cfg.figure_search == "separate":  # figures come from their own search (with_image_search)
            targets = self.without_figures(targets)
        # Dedup before the cut, so a dropped repeat's slot goes to the next unit.
        kept = dedup(targets, cfg.dedup)
        if cfg.reranker is not None and kept:
            texts = {n: node.text for n, node in self.store.get_nodes(kept[: cfg.rerank_top_n]).items()}
            kept, by_score = rerank_top(
                kept, texts, queries[0], self.reranker(cfg.reranker), cfg.rerank_top_n, cfg.rerank_passage_chars
            )
            scores.update(by_score)
        kept = kept[: cfg.top_k_final]
        if cfg.bm25_mode == "append":
            # KohakuRAG's setting: BM25 hits after the dense ones, in query order.
            for query in queries:
                for node_id, score in self.bm25_hits(query, cfg):
                    if cfg.expand_to == "section" and node_id.count(":") >= 2:
                        node_id = node_id.rsplit(":", 1)[0]
                    scores.setdefault(node_id, score)
                    if node_id not in kept:
                        kept = dedup([*kept, node_id], cfg.dedup)
        items = [
            item
            for item in self.context_items(kept, scores)
            if cfg.content == "all" or item.attachment not in MEDIA_ATTACHMENTS
        ]
        if cfg.figure_search == "separate":
            items = self.with_image_search(items, vectors, weights, cfg)
        return self.context.pack(queries[0], items, cfg)

    def context_items(self, node_ids: Sequence[str], scores: Mapping[str, float]) -> list[ContextItem]:
        """The stored nodes `node_ids` (in that order; unknown ids left out) as context items,
        with their document title and section heading."""
        rows = self.store.get_nodes(list(node_ids))
        parents = self.store.get_nodes(
            {r.parent_id for r in rows.values() if r.parent_id} | {r.doc_id for r in rows.values()}
        )
        return [
            ContextItem(
                doc_id=rows[n].doc_id,
                node_id=n,
                kind=rows[n].kind,
                page=rows[n].page,
                score=scores[n],
                text=rows[n].text,
                attachment=rows[n].attachment,
                doc_title=self.doc_title(rows[n].doc_id, parents.get(rows[n].doc_id)),
                section=section_heading(parents.get(rows[n].parent_id or "")),
                media_hash=rows[n].media_hash,
                table=rows[n].table,
            )
            for n in node_ids
            if n in rows
        ]

    def text_units(self, node_ids: Sequence[str]) -> list[str]:
        """The text units among `node_ids` (table and figure nodes left out), in order."""
        rows = self.store.get_nodes(list(dict.fromkeys(node_ids)))
        return [n for n in node_ids if n in rows and rows[n].attachment not in MEDIA_ATTACHMENTS]

    # ── figures from a search of their own (figure_search = "separate", KohakuRAG's top_k_images) ──

    def without_figures(self, node_ids: Sequence[str]) -> list[str]:
        """`node_ids` without figure (and page image) nodes, in order."""
        rows = self.store.get_nodes(list(dict.fromkeys(node_ids)))
        return [n for n in node_ids if n not in rows or rows[n].attachment not in IMAGE_ATTACHMENTS]

    def image_hits(self, vectors: np.ndarray, weights: Sequence[float], cfg: RetrievalConfig) -> dict[str, float]:
        """The `top_k_images` figures (and page images) closest to the queries' vectors:
        node id -> its best (query-weighted) similarity, best first."""
        best: dict[str, float] = {}
        for vector, weight in zip(vectors, weights, strict=True):
            hits = [h for a in IMAGE_ATTACHMENTS for h in self.store.search_attached(vector, a, cfg.top_k_images)]
            for hit in hits:
                if hit.score >= cfg.threshold:
                    best[hit.node_id] = max(best.get(hit.node_id, float("-inf")), weight * hit.score)
        ranked = sorted(best, key=lambda n: (-best[n], n))[: cfg.top_k_images]
        return {n: best[n] for n in ranked}

    def with_image_search(
        self, items: Sequence[ContextItem], vectors: np.ndarray, weights: Sequence[float], cfg: RetrievalConfig
    ) -> list[ContextItem]:
        """The text items, cut to leave room for the image search's figures, then the
        figures (so `img_k` sends the best of them). Figures come first for the budget:
        they were asked for by count."""
        scores = self.image_hits(vectors, weights, cfg)
        figures = pack(self.context_items(list(scores), scores), cfg.budget_chars)
        room = cfg.budget_chars - sum(len(f.text) for f in figures)
        text = pack([i for i in items if i.attachment not in IMAGE_ATTACHMENTS], room)
        return [*text, *figures]


# ── opening the lake's index ──────────────────────────────────────────────


def open_retriever(lake: Lake, cfg: IndexConfig, chat_for: Callable[[LLMSpec], ChatModel] | None = None) -> Retriever:
    """The lake's retriever over the published generation. `chat_for` gives an LLM reranker
    the process's loaded model (ModelPool.chat), so the bundled model is not loaded twice;
    else it loads its own."""
    embedder = make_embedder(cfg.embedder, lake.cache_dir / "embeddings")
    index = open_published(lake, embedder)

    def reranker_for(spec: RerankerSpec) -> Reranker:
        chat = None
        if spec.backend == "llm" and chat_for is not None:
            chat = chat_for(LLMSpec(model=spec.model) if spec.model else LLMSpec())
        return make_reranker(spec, embedder=embedder, lake_root=lake.root, chat=chat)

    return Retriever(embedder, index.store, index.bm25, index.aids, reranker_for)


def open_vector_store(lake: Lake, embedder: Embedder) -> VectorStore:
    """The lake's published vector store, checked against the embedder that queries it."""
    return open_published(lake, embedder, bm25=False).store
