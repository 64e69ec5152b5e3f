"""Citing: which context snippets state an answer, and cutting an answer's citations to the
document that states it (`cite = "source"`)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from kohaku_rag.answering.prompt import enum_spelling
from kohaku_rag.evaluation.normalise import is_blank_value
from kohaku_rag.evaluation.records import Answer
from kohaku_rag.retrieval.context import ContextItem


def states(text: str, value: str) -> bool:
    """Whether a snippet spells out an answer value (a number or name; a 1/0 verdict or a
    range is not something a snippet spells out)."""
    value = value.strip()
    if len(value) < 2 or is_blank_value(value) or value.startswith("["):
        return False
    return re.search(rf"(?<![\w.]){re.escape(value.lower())}(?![\w]|\.\d)", text.lower().replace(",", "")) is not None


def cite_source(answer: Answer, items: Sequence[ContextItem]) -> Answer:
    """The answer citing one document: the first it cites whose snippets state its value or
    hold its quoted evidence sentence, else the first it cites (`cite = "source"`)."""
    if len(answer.ref_id) <= 1:
        return answer
    # The quote was offered in the enum's spelling (evidence_sentences): compare in it.
    quote = answer.supporting_materials.strip()[:100]

    def supports(item: ContextItem) -> bool:
        return states(item.text, answer.answer_value) or bool(quote and quote in enum_spelling(item.text))

    stating = {i.doc_id for i in items if supports(i)}
    source = next((d for d in answer.ref_id if d in stating), answer.ref_id[0])
    return dataclasses.replace(answer, ref_id=(source,))
