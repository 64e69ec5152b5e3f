"""Marikarp's knowledge-aware diverse reranking (SIGIR 2025 LiveRAG winner; Tong Zhou,
"Knowledge-Aware Diverse Reranking for Cross-Source Question Answering", arXiv:2506.20476).

A question often needs several pieces of knowledge (a model's energy and its number of
GPUs; a definition and a value); a relevance ranking by the question alone tends to fill
the context with one of them. The rerank:

1. ranks the candidates (the retriever's top `diverse_candidates` units) with a
   `Reranker` by the question (the initial rerank);
2. asks the LLM, for each of the top `diverse_n_know` candidates (cut to
   `diverse_passage_chars`), which knowledge elements the question needs and which ones
   that passage covers (one call per passage);
3. asks it once more to summarise them into two complementary element sets;
4. ranks the candidates again with (question + element set i) as the query, i = 0, 1,
   and interleaves the two rankings (alternately, keeping their orders, no repeats).

Its cost is bounded: n_know + 1 short LLM calls per search, each cached like every LLM
call (a second run asks nothing). A call that fails with a reply the schema cannot use
falls back to the initial rerank; an endpoint that is down fails the search (the question's
retrieval is stored as failed and retried), like the planner.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kohaku_rag.answering.qa_config import RetrievalPart
from kohaku_rag.llm import ChatModel, ChatRequest, Message
from kohaku_rag.llm.base import UnusableReply, extract_json, loads_json
from kohaku_rag.retrieval.bm25_reranker import Bm25Reranker
from kohaku_rag.retrieval.context import ContextItem, pack
from kohaku_rag.retrieval.rerankers import EmbeddingReranker, Reranker
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig
from kohaku_rag.retrieval.retriever import Retriever

__all__ = [
    "DiverseSearcher",
    "KnowledgeSets",
    "diverse_order",
    "interleave",
    "knowledge_sets",
    "reranker_for",
]

log = logging.getLogger(__name__)
SYSTEM = "You analyse which knowledge a question needs and which a document gives. Reply with JSON only."
MAX_ELEMENTS = 4  # elements per list in a reply: short replies bound the cost on a CPU model


@dataclass(frozen=True)
class KnowledgeSets:
    """Two complementary sets of knowledge elements (empty when the LLM gave none)."""

    first: tuple[str, ...]
    second: tuple[str, ...]
    fallback: bool = False  # True when a reply was unusable and the initial rerank stands


def _list_schema(*names: str) -> dict[str, Any]:
    item = {"type": "string", "minLength": 2, "maxLength": 80}
    return {
        "type": "object",
        "properties": {n: {"type": "array", "items": item, "maxItems": MAX_ELEMENTS} for n in names},
        "required": list(names),
        "additionalProperties": False,
    }


def _json_request(user: str, schema: dict[str, Any]) -> ChatRequest:
    """A short, greedy, schema-bound call (both steps' replies are two lists of phrases)."""
    return ChatRequest(
        (Message("system", SYSTEM), Message("user", user)), temperature=0.0, max_tokens=160, seed=0, json_schema=schema
    )


def declare_request(question: str, passage: str, max_chars: int) -> ChatRequest:
    """Step 2 for one passage: the elements the question needs, those the passage covers."""
    user = (
        f"Question: {question}\n\nDocument:\n{' '.join(passage.split())[:max_chars]}\n\n"
        "List the pieces of knowledge needed to answer the question (short phrases), and which "
        'of them this document gives. Reply as {"needed": ["..."], "covered": ["..."]}.'
    )
    return _json_request(user, _list_schema("needed", "covered"))


def summarise_request(question: str, needed: Sequence[str], covered: Sequence[str]) -> ChatRequest:
    """Step 3: two complementary element sets from every passage's declarations."""
    listed = "\n".join(f"- {e}" for e in needed) or "- (none)"
    found = "\n".join(f"- {e}" for e in covered) or "- (none)"
    user = (
        f"Question: {question}\n\nKnowledge the question needs:\n{listed}\n\nKnowledge the documents "
        f"give:\n{found}\n\nSplit the knowledge needed into two complementary sets, so that a search "
        "for each set finds different evidence the answer needs. "
        'Reply as {"first": ["..."], "second": ["..."]}.'
    )
    return _json_request(user, _list_schema("first", "second"))


def _elements(text: str, names: Sequence[str]) -> dict[str, list[str]] | None:
    raw = extract_json(text)
    data = loads_json(raw) if raw is not None else None
    if not isinstance(data, dict):
        return None
    out: dict[str, list[str]] = {}
    for name in names:
        values = data.get(name)
        if not isinstance(values, list):
            return None
        out[name] = [v.strip() for v in values if isinstance(v, str) and v.strip()][:MAX_ELEMENTS]
    return out


def knowledge_sets(question: str, passages: Sequence[str], chat: ChatModel, max_chars: int) -> KnowledgeSets:
    """Steps 2 and 3: len(passages) + 1 LLM calls (the declarations are sent together, so a
    server answers them at once)."""
    if not passages:
        return KnowledgeSets((), (), fallback=True)
    try:
        replies = chat.complete_many([declare_request(question, p, max_chars) for p in passages])
        needed: dict[str, None] = {}
        covered: dict[str, None] = {}
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
            got = _elements(reply.text, ("needed", "covered"))
            if got is None:
                continue
            needed.update(dict.fromkeys(got["needed"]))
            covered.update(dict.fromkeys(got["covered"]))
        if not needed:
            return KnowledgeSets((), (), fallback=True)
        reply = chat.complete(summarise_request(question, list(needed), list(covered)))
        summary = _elements(reply.text, ("first", "second"))
    except UnusableReply as exc:  # the model answered, unusably: asking again gives the same
        log.warning("diverse rerank: no knowledge sets (%s); the initial rerank stands", exc)
        return KnowledgeSets((), (), fallback=True)
    # Any other error (the endpoint down, a 401) is a failed call: it propagates, and the
    # question's retrieval is stored as failed and asked again next run.
    if summary is None or not (summary["first"] or summary["second"]):
        return KnowledgeSets((), (), fallback=True)
    return KnowledgeSets(tuple(summary["first"]), tuple(summary["second"]))


def interleave(first: Sequence[str], second: Sequence[str]) -> list[str]:
    """Alternately the next of `first` and of `second` not taken yet, keeping each list's
    order (first starts), until both are used up."""
    out: dict[str, None] = {}
    a, b = list(first), list(second)
    i = j = 0
    while i < len(a) or j < len(b):
        while i < len(a) and a[i] in out:
            i += 1
        if i < len(a):
            out[a[i]] = None
            i += 1
        while j < len(b) and b[j] in out:
            j += 1
        if j < len(b):
            out[b[j]] = None
            j += 1
    return list(out)


def ranked_ids(reranker: Reranker, query: str, items: Sequence[ContextItem]) -> list[str]:
    """The items' node ids by the reranker's score for `query` (ties keep their order)."""
    scores = reranker.scores(query, [i.text for i in items])
    order = sorted(range(len(items)), key=lambda n: -scores[n])
    return [items[n].node_id for n in order]


def diverse_order(
    question: str,
    items: Sequence[ContextItem],
    reranker: Reranker,
    chat: ChatModel,
    n_know: int,
    max_chars: int,
    index_lock: contextlib.AbstractContextManager[Any] | None = None,
) -> tuple[list[ContextItem], KnowledgeSets]:
    """The items in the diverse order (steps 1-4), and the element sets it used. The
    rankings hold `index_lock` (the reranker may use the index's shared embedder); the LLM
    calls do not, so other questions search meanwhile."""
    lock = index_lock or contextlib.nullcontext()
    by_id = {i.node_id: i for i in items}
    with lock:
        initial = ranked_ids(reranker, question, items)
    sets = knowledge_sets(question, [by_id[n].text for n in initial[:n_know]], chat, max_chars)
    if sets.fallback:
        return [by_id[n] for n in initial], sets
    with lock:
        rankings = [
            ranked_ids(reranker, f"{question} {'; '.join(elements)}" if elements else question, items)
            for elements in (sets.first, sets.second)
        ]
    return [by_id[n] for n in interleave(*rankings)], sets


def reranker_for(part: RetrievalPart, retriever: Retriever) -> Reranker:
    """The config's reranker: "embedding" scores with the index's own embedder, "bm25" with
    the index's BM25 weights, "cross_encoder" with the search's `[retrieval.reranker]`."""
    if part.diverse_reranker == "cross_encoder":
        if part.search.reranker is None:
            raise ValueError('diverse_reranker = "cross_encoder" needs a [retrieval.reranker] table')
        return retriever.reranker(part.search.reranker)
    if part.diverse_reranker == "embedding":
        return EmbeddingReranker(retriever.embedder)
    if retriever.bm25 is None:
        raise ValueError('diverse_reranker = "bm25" needs the BM25 index, and this lake has none')
    return Bm25Reranker(retriever.bm25)


class DiverseSearcher:
    """A searcher whose context is diversely reranked: the inner retriever finds the
    candidates, `diverse_order` orders them, the context is cut and packed as usual.
    With `index_lock`, only the index work is serialized, not the LLM's knowledge calls."""

    def __init__(
        self,
        inner: Retriever,
        reranker: Reranker,
        chat: ChatModel,
        part: RetrievalPart,
        index_lock: threading.Lock | None = None,
    ) -> None:
        self.inner = inner
        self.reranker = reranker
        self.chat = chat
        self.part = part
        self._lock: contextlib.AbstractContextManager[Any] = index_lock or contextlib.nullcontext()

    def search(self, queries: Sequence[str], cfg: RetrievalConfig) -> list[ContextItem]:
        queries = [q for q in queries if q.strip()]
        if not queries:
            return []
        pool = None if cfg.top_k_final is None else max(self.part.diverse_candidates, cfg.top_k_final)
        wide = dataclasses.replace(cfg, top_k_final=pool, budget_chars=10**9, mark_sentences=0)
        with self._lock:
            candidates = self.inner.search(queries, wide)
        # The question is the first query (the planner's rewrites follow it).
        ordered, _sets = diverse_order(
            queries[0],
            candidates,
            self.reranker,
            self.chat,
            self.part.diverse_n_know,
            self.part.diverse_passage_chars,
            self._lock,
        )
        packed = pack(ordered[: cfg.top_k_final], cfg.budget_chars)
        if cfg.mark_sentences > 0 and self.inner.bm25 is not None:
            with self._lock:
                packed = self.inner.context.mark_evidence(queries[0], packed, cfg.mark_sentences)
        return packed
