"""One run's answer to one question with what it cost, and its stored row."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from kohaku_rag.answering.citing import states
from kohaku_rag.answering.compute import named_cells, named_operands
from kohaku_rag.answers.records import Answer
from kohaku_rag.document.table_record import GROUP_SEP, cells_stating, row_names
from kohaku_rag.retrieval.context import ContextItem


@dataclass(frozen=True)
class Prediction:
    """One run's answer to one question, with what it cost."""

    question_id: str
    run: int
    seed: int
    answer: Answer
    attempts: int  # LLM answer calls that counted (1 + is_blank retries)
    k_used: int  # context snippets in the prompt that produced the answer
    context_chars: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float  # LLM time of this run (shared prompt evaluation charged to the run that paid it)
    llm_calls: int
    cached_calls: int
    # Set when an LLM call failed (after its retries): the run is a failure, not an answer
    # (its answer is a blank placeholder that is never voted nor scored) and is asked again.
    error: str = ""
    # log P(True) - log P(False) from a true/false statement's verdict call (None: none made)
    verdict_logodds: float | None = None
    # log P(Yes) - log P(No) from the support check, "does the context state this answer?"
    # (abstain = "unsupported"; None: none made)
    support_logodds: float | None = None
    # A computed answer's working (compute.py's Working as JSON; "" when none was written).
    working: str = ""
    # Of prompt_tokens, those the model evaluated; the rest were reused from a saved or kept
    # KV state (None: a backend did not say, or a row stored before the split was).
    prompt_tokens_evaluated: int | None = None
    context: tuple[ContextItem, ...] = ()  # the snippets of the answering prompt (not stored in rows)
    # Every LLM call of this run: {"attempt", "kind" (answer/verdict/support), "k", "prompt", "reply"}
    # (stored in the debug table, not in rows).
    debug: tuple[dict[str, Any], ...] = ()

    def cited(self) -> list[ContextItem]:
        """The context snippets that support the answer (node ids and pages): those of the
        cited documents that state the answer's value, else every snippet of those documents."""
        named = {o.node for o in named_operands(self.working)}
        if named:  # the tables whose cells the reply named and the code read
            return [i for i in self.context if i.node_id in named]
        refs = set(self.answer.ref_id)
        snippets = [i for i in self.context if i.doc_id in refs]
        stating = [i for i in snippets if states(i.text, self.answer.answer_value)]
        return stating or snippets

    def cited_cells(self) -> list[str]:
        """Where a value read from a table came from: "Table 2 · text generation · mean"
        (table, row, column). The cells the reply named, when it named any (table_cells.py);
        else one per cited table whose record states the value."""
        if self.answer.is_blank:
            return []
        named = named_cells(self.working)
        if named:
            return named
        out = []
        for item in self.cited():
            if item.table is None:
                continue
            stating = cells_stating(item.table, self.answer.answer_value)
            if stating:
                row, column = stating[0]
                parts = (item.table.label, row_names(item.table)[row], column)
                out.append(GROUP_SEP.join(part for part in parts if part))
        return out

    def as_row(self) -> dict[str, Any]:
        a = self.answer
        return {
            "id": self.question_id,
            "run": self.run,
            "seed": self.seed,
            "answer": a.answer,
            "answer_value": a.answer_value,
            "answer_unit": a.answer_unit,
            "ref_id": list(a.ref_id),
            "explanation": a.explanation,
            "supporting_materials": a.supporting_materials,
            "is_blank": a.is_blank,
            "attempts": self.attempts,
            "k_used": self.k_used,
            "context_chars": self.context_chars,
            "prompt_tokens": self.prompt_tokens,
            "prompt_tokens_evaluated": self.prompt_tokens_evaluated,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 4),
            "llm_calls": self.llm_calls,
            "cached_calls": self.cached_calls,
            "error": self.error,
            "verdict_logodds": self.verdict_logodds,
            "support_logodds": self.support_logodds,
            "confidence": a.confidence,
            "working": self.working,
            "cited_nodes": [i.node_id for i in self.cited()],
            "cited_cells": self.cited_cells(),
        }


def prediction_from_row(row: dict[str, Any]) -> Prediction:
    answer = Answer(
        answer=row["answer"],
        answer_value=row["answer_value"],
        answer_unit=row["answer_unit"],
        ref_id=tuple(row["ref_id"] or ()),
        explanation=row["explanation"],
        is_blank=bool(row["is_blank"]),
        supporting_materials=row["supporting_materials"],
        confidence=row.get("confidence"),
    )
    # Rows written before a column existed read back as that field's default.
    values = {
        f.name: row.get(f.name, f.default)
        for f in dataclasses.fields(Prediction)
        if f.name not in ("question_id", "answer", "context", "debug")
    }
    return Prediction(question_id=row["id"], answer=answer, **values)
