"""Building the context from the units a search found: each unit cut to its best sentences'
windows, a long table cut to its rows that share the question's terms, the items packed
into the character budget, and the sentences that answer best marked as evidence.

One scorer serves all of it (`question_weights` and `sentence_score`): a sentence, a table
row or a window counts the share of the question's IDF weight whose terms it holds, so the
windows kept, the rows kept and the sentences marked agree.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import replace

from kohaku_rag.document.table_record import row_record, table_text, with_rows
from kohaku_rag.document.tree import NodeKind
from kohaku_rag.retrieval.context import MEDIA_ATTACHMENTS, ContextItem, pack
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig
from kohaku_rag.retrieval.windows import CAPTION, window_text
from kohaku_rag.stores.bm25 import BM25Index, tokenize
from kohaku_rag.stores.vectors import VectorStore

__all__ = ["ContextBuilder", "sentence_score"]


def sentence_score(sentence: str, weights: Mapping[str, float]) -> float:
    """The share of the question's IDF weight whose terms the sentence holds."""
    terms = set(tokenize(sentence))
    return sum(w for t, w in weights.items() if t in terms)


class ContextBuilder:
    """Shapes found units into the context: it reads sentences from the vector store and
    term weights from BM25 (without BM25, units are packed whole and nothing is marked)."""

    def __init__(self, store: VectorStore, bm25: BM25Index | None) -> None:
        self.store = store
        self.bm25 = bm25

    def pack(self, question: str, items: Sequence[ContextItem], cfg: RetrievalConfig) -> list[ContextItem]:
        """The ranked units packed into `cfg.budget_chars` as `cfg.pack` says, their best
        sentences marked (`mark_sentences`)."""
        if cfg.pack == "windows" and self.bm25 is not None:
            items = self.windows(question, items, cfg)
        if self.bm25 is not None and cfg.table_chars is not None:
            limit = cfg.table_chars
            items = [self.table_rows(question, i, limit) if i.attachment == "table" else i for i in items]
        packed = pack(items, cfg.budget_chars)
        if cfg.mark_sentences > 0 and self.bm25 is not None:
            packed = self.mark_evidence(question, packed, cfg.mark_sentences)
        return packed

    def question_weights(self, question: str) -> dict[str, float]:
        """The question's terms with their IDF, as shares of its total IDF."""
        assert self.bm25 is not None
        weights = {t: self.bm25.idf(t) for t in set(tokenize(question))}
        total = sum(weights.values()) or 1.0
        return {t: w / total for t, w in weights.items()}

    def windows(self, question: str, items: Sequence[ContextItem], cfg: RetrievalConfig) -> list[ContextItem]:
        """Each unit cut to its best sentences' windows (windows.py); short units, tables and
        figures stay whole."""
        weights = self.question_weights(question)
        out = []
        for item in items:
            sentences = [
                c.text for c in self.store.children(item.node_id) if c.kind == NodeKind.SENTENCE and c.text.strip()
            ]
            if len(item.text) < cfg.window_min_chars or item.attachment in MEDIA_ATTACHMENTS or len(sentences) < 2:
                out.append(item)
                continue
            scores = [sentence_score(s, weights) for s in sentences]
            text = window_text(sentences, scores, cfg.window_sentences, cfg.window_neighbours)
            out.append(replace(item, text=text) if len(text) < len(item.text) else item)
        return out

    def table_rows(self, question: str, item: ContextItem, limit: int) -> ContextItem:
        """A long table cut to its caption (and row-label line) and the rows sharing the most
        question terms, kept in table order, within `limit` characters."""
        if len(item.text) <= limit:
            return item
        if item.table is not None:
            return self.record_rows(question, item, limit)
        lines = item.text.split("\n")
        head = [ln for ln in lines[:2] if CAPTION.search(ln + " ") or ln.startswith("(rows:")]
        rows = lines[len(head) :]
        weights = self.question_weights(question)
        ranked = sorted(range(len(rows)), key=lambda k: (-sentence_score(rows[k], weights), k))
        used = sum(len(ln) + 1 for ln in head)
        keep: list[int] = []
        for k in ranked:
            if used + len(rows[k]) + 1 > limit:
                continue
            keep.append(k)
            used += len(rows[k]) + 1
        return replace(item, text="\n".join([*head, *(rows[k] for k in sorted(keep))]))

    def record_rows(self, question: str, item: ContextItem, limit: int) -> ContextItem:
        """`table_rows` of a table kept as a record: the rows whose records share the most
        question terms, in table order, while the table's text fits in `limit`."""
        assert item.table is not None
        table = item.table
        weights = self.question_weights(question)
        texts = [row_record(table, row) for row in table.rows]
        ranked = sorted(range(len(texts)), key=lambda k: (-sentence_score(texts[k], weights), k))
        used = len(table_text(with_rows(table, [])))  # the caption and row-label lines
        keep: list[int] = []
        for k in ranked:
            if used + len(texts[k]) + 1 <= limit:
                keep.append(k)
                used += len(texts[k]) + 1
        kept = with_rows(table, keep)
        return replace(item, text=table_text(kept), table=kept)

    def mark_evidence(self, question: str, items: list[ContextItem], n: int) -> list[ContextItem]:
        """Mark the `n` sentences (over all items) whose terms cover most of the question's
        IDF weight; a sentence counts only where it appears verbatim in its item's text."""
        weights = self.question_weights(question)
        scored: list[tuple[float, int, str]] = []
        for index, item in enumerate(items):
            for sentence in self.store.children(item.node_id):
                if sentence.kind != NodeKind.SENTENCE or sentence.text not in item.text:
                    continue
                score = sentence_score(sentence.text, weights)
                if score > 0:
                    scored.append((score, index, sentence.text))
        scored.sort(key=lambda s: -s[0])
        marks: dict[int, list[str]] = defaultdict(list)
        for _score, index, text in scored[:n]:
            marks[index].append(text)
        return [replace(item, marks=tuple(marks[i])) if i in marks else item for i, item in enumerate(items)]
