"""Citing: which context snippets state an answer, and cutting an answer's citations to the
document that states it (`cite = "source"`).

A question that combines documents keeps one cited document per side (the 2026
reference score is F1 over the gold set, so citing one of two earns 0.67): for a question
the rule-based split divides (entity_split.py), each side's query keeps the cited document
whose snippets share the most of its words; for a question asking for several values
(answer_forms.py), every cited document stating one of the answer's members is kept."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from kohaku_rag.answering.entity_split import entity_queries
from kohaku_rag.answering.prompt import enum_spelling
from kohaku_rag.answers.answer_forms import asks_for_several
from kohaku_rag.answers.normalise import is_blank_value, split_collection
from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.retrieval.context import ContextItem


def states(text: str, value: str) -> bool:
    """Whether a snippet spells out an answer value (a number or name; a 1/0 verdict or a
    range is not something a snippet spells out)."""
    value = value.strip()
    if len(value) < 2 or is_blank_value(value) or value.startswith("["):
        return False
    return re.search(rf"(?<![\w.]){re.escape(value.lower())}(?![\w]|\.\d)", text.lower().replace(",", "")) is not None


def cite_source(answer: Answer, items: Sequence[ContextItem], question: Question | None = None) -> Answer:
    """The answer citing its source: the first document it cites whose snippets state its
    value or hold its quoted evidence sentence, else the first it cites (`cite = "source"`);
    for a question combining documents, one per side as well (module docstring)."""
    if len(answer.ref_id) <= 1:
        return answer
    if question is not None and asks_for_several(question):
        members = split_collection(answer.answer_value)
        if members is not None:
            listed = [d for d in answer.ref_id if any(_states_any(i.text, members[1]) for i in items if i.doc_id == d)]
            if listed:
                return dataclasses.replace(answer, ref_id=tuple(listed))
    # The quote was offered in the enum's spelling (evidence_sentences): compare in it.
    quote = answer.supporting_materials.strip()[:100]

    def supports(item: ContextItem) -> bool:
        return states(item.text, answer.answer_value) or bool(quote and quote in enum_spelling(item.text))

    stating = {i.doc_id for i in items if supports(i)}
    source = next((d for d in answer.ref_id if d in stating), answer.ref_id[0])
    sides = entity_queries(question.question) if question is not None else ()
    kept = dict.fromkeys([source, *(_closest(side, answer.ref_id, items) for side in sides)])
    return dataclasses.replace(answer, ref_id=tuple(d for d in answer.ref_id if d in kept))


def _states_any(text: str, members: Sequence[str]) -> bool:
    return any(states(text, m.strip()) or states(text, m.strip().replace(",", "")) for m in members)


_STOP = frozenset(["of", "in", "on", "to", "by", "at", "is", "as", "or", "an", "the", "and", "for", "was", "are"])


def _words(text: str) -> set[str]:
    """Lower-cased words of two characters or more ("7b" names a model), a few stop words out."""
    return {w for w in re.findall(r"[a-z0-9][a-z0-9.-]*[a-z0-9]", text.lower()) if w not in _STOP}


def _closest(query: str, cited: Sequence[str], items: Sequence[ContextItem]) -> str:
    """The cited document whose snippets (with their titles) share the most of the query's
    words, the first cited on a tie; "" when none shares any (the side keeps nothing)."""
    wanted = _words(query)

    def overlap(doc: str) -> int:
        return max((len(wanted & _words(f"{i.doc_title} {i.text}")) for i in items if i.doc_id == doc), default=0)

    best = max(cited, key=lambda d: (overlap(d), -cited.index(d)))
    return best if overlap(best) > 0 else ""
