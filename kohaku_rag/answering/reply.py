"""Reading the model's reply: the JSON as a normalised Answer, and its confidence."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from kohaku_rag.answering.choose import COMPUTED, OTHER
from kohaku_rag.answering.prompt import EXPLANATION_CAP, copies_a_rule
from kohaku_rag.answers.answer_forms import range_from_pair
from kohaku_rag.answers.normalise import expand_stated_magnitude, normalise_answer
from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.llm import ChatResult
from kohaku_rag.llm.base import extract_json, loads_json


def reply_json(text: str) -> dict[str, Any] | None:
    """The reply's JSON object (None when it holds none)."""
    raw = extract_json(text)
    data = loads_json(raw) if raw is not None else None
    return data if isinstance(data, dict) else None


def parse_reply(
    text: str, question: Question, doc_ids: Sequence[str], chose: bool = False, explanation_cap: int = EXPLANATION_CAP
) -> Answer:
    """The reply as a normalised Answer; unusable replies, is_blank and a value that copies
    its rule's words (prompt.copies_a_rule) become the abstention.
    `chose`: answer_value was a choice (choose.py), whose "other"/"computed" mean the value
    is in the reply's answer words (a computed result replaces it later)."""
    data = reply_json(text)
    if data is None or data.get("is_blank") is True:
        return Answer.blank(question.answer_unit)
    refs = data.get("ref_id")
    refs = [refs] if isinstance(refs, str) else refs if isinstance(refs, list) else []
    allowed = {d.lower(): d for d in doc_ids}
    cited = tuple(
        dict.fromkeys(allowed[r.strip().lower()] for r in refs if isinstance(r, str) and r.strip().lower() in allowed)
    )
    words, explanation = str(data.get("answer") or "").strip(), str(data.get("explanation") or "").strip()
    value = str(data.get("answer_value") or "")
    # A field that repeats its rule's words said nothing: no value is no answer.
    if copies_a_rule(value):
        return Answer.blank(question.answer_unit)
    words, explanation = ("" if copies_a_rule(t) else t for t in (words, explanation))
    explanation = ended(explanation, explanation_cap)
    if chose and value in (OTHER, COMPUTED):
        value = words
    value = range_from_pair(question, value)  # "0.8,3500" asked as a range is [0.8,3500]
    answer = Answer(
        answer=words,
        answer_value=expand_stated_magnitude(value, question.answer_unit, [words, explanation]),
        answer_unit=question.answer_unit,
        ref_id=cited,
        explanation=explanation,
        supporting_materials=str(data.get("evidence") or "").strip(),
    )
    return normalise_answer(answer, question.answer_unit, known_ref_ids=doc_ids)


_SENTENCE_END = re.compile(r"[.!?][\"')\]]?(?=\s)")


def ended(text: str, cap: int) -> str:
    """`text` as a reader sees it: whole when the model ended it itself; when it ran into the
    schema's cap (`cap` characters), cut back to its last whole sentence, else to its last
    whole word with an ellipsis, never mid-word."""
    if len(text) < cap - 1 or text.endswith((".", "!", "?")):
        return text
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    if ends and ends[-1] >= len(text) // 3:
        return text[: ends[-1]]
    head = text[: text.rfind(" ")] if " " in text else text
    return head.rstrip(" ,;:-(") + "…"


def with_confidence(answer: Answer, res: ChatResult) -> Answer:
    """The answer with the reply's mean token probability as its confidence (when known)."""
    if res.mean_logprob is None:
        return answer
    return dataclasses.replace(answer, confidence=float(np.exp(res.mean_logprob)))
