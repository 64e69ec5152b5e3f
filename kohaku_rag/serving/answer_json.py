"""An answer as the server's JSON: the reply's fields, its context, and each citation with
the sentence (or the table's cells) stating the value, the document's title and URL, and
what the page marks.

A citation's quote is bounded (table_rows.py): a long sentence is cut, a table quotes at
most its cited rows. Whether the cited passages state the value (`support`) and why an
answer is an abstention (`abstained_because`) are said in words the card shows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import kohaku_rag as kr
from kohaku_rag.answering.compute import Operand, named_operands
from kohaku_rag.answering.prediction import Prediction
from kohaku_rag.answers.value_form import FORM_CHECK
from kohaku_rag.document.table_record import row_record
from kohaku_rag.document.tree import Node, NodeKind
from kohaku_rag.parse.sentences import split_sentences
from kohaku_rag.retrieval.context import ContextItem
from kohaku_rag.serving.documents import Documents
from kohaku_rag.serving.errors import ApiError
from kohaku_rag.serving.table_rows import (
    bounded_quote,
    cell_citation,
    cut_text,
    is_table,
    record_quote,
    row_index,
    states_value,
    stating_cells,
    table_quote,
)

__all__ = ["RAW_FIELDS", "AnswerJson", "abstention_reason", "support_of"]

# What the raw-reply expander shows of each LLM call: the reply and where its time went
# (answer.call_cost: prompt tokens, of them evaluated, reply tokens, seconds, cached).
RAW_FIELDS = ("kind", "attempt", "reply", "prompt_tokens", "evaluated", "reply_tokens", "seconds", "cached")


class AnswerJson:
    """Writes answers as JSON, reading titles, URLs, sentences and table records from the
    lake's documents."""

    def __init__(self, documents: Documents) -> None:
        self.documents = documents

    def response(self, result: kr.AskResult, config: str, seconds: float) -> dict[str, Any]:
        pred = result.prediction
        named = named_operands(pred.working) if not result.is_blank else []
        cited = [
            self.citation(item, result.value, [o for o in named if o.node == item.node_id]) for item in result.cited
        ]
        return {
            "question": result.question,
            "answer": result.answer,
            "value": result.value,
            # null when no unit was asked: "is_blank" is WattBot's CSV spelling, not an API value
            "unit": None if result.unit in ("", "is_blank") else result.unit,
            "refs": list(result.refs),
            "explanation": result.explanation,
            "is_blank": result.is_blank,
            "cited": cited,
            # Why there is no answer, in words, when the reply's value was not of the asked form.
            "abstained_because": abstention_reason(pred) if result.is_blank else None,
            # Whether the cited passages state the value ("stated"), or not ("not stated": the
            # card says to check it); null for an abstention.
            "support": None if result.is_blank else support_of(pred, cited),
            "context": [self.context_item(i) for i in pred.context],
            "raw": [{k: d.get(k) for k in RAW_FIELDS} for d in pred.debug],
            "seconds": round(seconds, 3),
            "config": config,
            "stored": False,
            "usage": {
                "prompt_tokens": pred.prompt_tokens,
                "prompt_tokens_evaluated": pred.prompt_tokens_evaluated,
                "completion_tokens": pred.completion_tokens,
            },
        }

    def context_item(self, item: ContextItem) -> dict[str, Any]:
        return {
            "doc_id": item.doc_id,
            "node_id": item.node_id,
            "kind": item.kind,
            "page": item.page,
            "score": round(item.score, 6),
            "text": item.text,
            "title": item.doc_title or self._title(item.doc_id),
        }

    def citation(self, item: ContextItem, value: str, named: Sequence[Operand] = ()) -> dict[str, Any]:
        """A cited snippet with its document's title and URL, the sentence that states the
        value (`quote`) and that sentence's node (what a page highlight marks). `named`: the
        cells of this table the reply named and the code read (table_cells.py)."""
        cell: dict[str, str] | None = None
        cells: list[dict[str, str]] = []
        highlights = [value]
        table = self._named_citation(item, named) if named else None
        if table is not None:
            quote, sentence_id, cells, highlights = table
            cell = cells[0]
        elif (recorded := self._table_citation(item, value)) is not None:
            quote, sentence_id, cell = recorded
            cells = [cell] if cell else []
        else:
            quote, sentence_id = self._quote(item, value)
        title, url = self._title_url(item.doc_id)
        return {
            "doc_id": item.doc_id,
            "node_id": item.node_id,
            "sentence_id": sentence_id,
            "page": item.page,
            # What tells a document's passages apart on a button (a phone has no tooltip).
            "section": item.section,
            # Whether the passage states the answer's value: the page lists it first.
            "states_value": states_value(item.text, value),
            "title": title,
            "url": url,
            "text": item.text,
            # bounded: a long sentence is cut, a table quotes at most QUOTE_ROWS rows (table_rows.py)
            "quote": cut_text(quote),
            # a cited table's cell stating the value: {"table", "row", "column"} (or null)
            "cell": cell,
            # every cell the value was read or computed from, each named ([] when none)
            "cells": cells,
            # what the page marks in this passage: the value, or the cells the value was read from
            "highlight_values": highlights,
        }

    def _recorded(self, item: ContextItem) -> tuple[Node, list[Node]] | None:
        """The cited item's table paragraph and its row sentences, when the lake keeps it as a
        record (None otherwise, or when the document is gone)."""
        try:
            return self.documents.recorded_table(item.doc_id, item.node_id)
        except ApiError:
            return None

    def _named_citation(
        self, item: ContextItem, named: Sequence[Operand]
    ) -> tuple[str, str, list[dict[str, str]], list[str]] | None:
        """(quote, node to mark, cells, their values) of the cells the reply named in a table
        kept as a record (the node: the cells' row, or the table when they are in several);
        None when the lake's table no longer has them."""
        recorded = self._recorded(item)
        if recorded is None:
            return None
        para, children = recorded
        table = para.table
        assert table is not None
        rows: list[int] = []
        cells: list[dict[str, str]] = []
        marked: list[str] = []
        for o in named:
            row = next((i for i, r in enumerate(table.rows) if r.label == o.table_row), None)
            if row is None or o.table_column not in table.columns:
                return None
            rows.append(row)
            cells.append({"table": table.label or "table", "row": o.table_row, "column": o.table_column})
            marked.append(table.rows[row].cells[table.columns.index(o.table_column)])
        sentence = next((c for c in children if len(set(rows)) == 1 and row_index(para, c) == rows[0]), para)
        quoted = [row_record(table, table.rows[i]) for i in dict.fromkeys(rows)]
        quote = bounded_quote([table.caption] if table.caption else [], quoted, len(quoted))
        return quote, sentence.node_id, cells, marked

    def _table_citation(self, item: ContextItem, value: str) -> tuple[str, str, dict[str, str] | None] | None:
        """(quote, row sentence id, cell) of a cited table kept as a record; None otherwise."""
        recorded = self._recorded(item)
        if recorded is None:
            return None
        para, children = recorded
        assert para.table is not None
        stating = stating_cells(para.table, value)
        if not stating:
            return record_quote(para.table, value), para.node_id, None
        row = stating[0][0]
        sentence = next((c for c in children if row_index(para, c) == row), para)
        return record_quote(para.table, value, [row]), sentence.node_id, cell_citation(para.table, value, [row])

    def _quote(self, item: ContextItem, value: str) -> tuple[str, str]:
        try:
            sentences = [n for n in self.documents.sentences(item.doc_id, item.node_id) if n.kind is NodeKind.SENTENCE]
        except ApiError:
            sentences = []
        if sentences:
            stating = [s for s in sentences if states_value(s.text, value)]
            stating = stating or [s for s in sentences if s.text in item.marks]
            best = (stating or sentences)[0]
            return (table_quote(best.text, value) if is_table(best) else best.text), best.node_id
        parts = split_sentences(item.text) or [item.text]
        stating_text = [s for s in parts if states_value(s, value)]
        return (stating_text or parts)[0], item.node_id

    def _title_url(self, doc_id: str) -> tuple[str, str]:
        try:
            info = self.documents.info(doc_id)
        except ApiError:
            return doc_id, ""
        return info.title, info.url

    def _title(self, doc_id: str) -> str:
        return self._title_url(doc_id)[0]


def abstention_reason(pred: Prediction) -> str | None:
    """The form check's reason (answers/value_form.py) when it turned the reply into an abstention."""
    reasons = [str(d.get("reply")) for d in pred.debug if d.get("kind") == FORM_CHECK]
    return reasons[-1] if reasons else None


def support_of(pred: Prediction, cited: list[dict[str, Any]]) -> dict[str, Any]:
    """{"stated": bool, "note": plain words}: a cited passage states the value (a sentence or a
    table cell holds it) and the model's support check, where one ran, did not doubt it."""
    in_text = any(c["states_value"] or c["cell"] for c in cited)
    doubted = pred.support_logodds is not None and pred.support_logodds < 0
    if in_text and not doubted:
        return {"stated": True, "note": ""}
    note = (
        "The cited passages do not state this value: it may be computed or misread. Check it against them."
        if not in_text
        else "The model doubts the cited passages state this value. Check it against them."
    )
    return {"stated": False, "note": note}
