"""Question types (HERO, WattBot 2025): six kinds of question, detected by patterns, each
with its own prompt instruction, context sizes and content to search.

HERO routes a question by its type: complex types (a value read from a table, a score, a
count) get a small strict context first (top 3) and a wide one when that abstains (top 10);
simpler ones get top 5 then top 7. Which nodes a type searches is the "text-only vs hybrid"
routing: a name or a definition is written in prose, so term and general questions search
text nodes only; the others also search table and figure nodes.

Detection is by patterns over the question's words and its expected unit, tried in the
order of `TYPES` (the first match wins), so it costs nothing and is the same every run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from kohaku_rag.answering.qa_config import RetrievalPart
from kohaku_rag.answers.normalise import is_blank_value
from kohaku_rag.answers.records import Question
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig

__all__ = [
    "ROUTES",
    "TYPES",
    "QuestionType",
    "Route",
    "detect_type",
    "route_for",
    "search_config",
    "type_counts",
]

QuestionType = Literal[
    "table_extraction", "score_extraction", "model_specific", "term_extraction", "numeric_counting", "general"
]
Content = Literal["all", "text"]


@dataclass(frozen=True)
class Route:
    """What a question type changes: a line of the answering prompt, the context units of
    the first (strict) and second (relaxed) stage, and which nodes it searches."""

    kind: QuestionType
    instruction: str
    k: int  # context units of a single-stage answer, and of stage 1 of two
    relaxed_k: int  # context units of stage 2
    content: Content  # "text": text nodes only; "all": text, table and figure nodes


ROUTES: dict[QuestionType, Route] = {
    "table_extraction": Route(
        "table_extraction",
        "The answer is a value in a table or a comparison of listed values: find the row and the "
        "column the question names and read the value where they cross.",
        3,
        10,
        "all",
    ),
    "score_extraction": Route(
        "score_extraction",
        "The answer is a score, rate, share or factor: copy the number written next to the metric "
        "the question names; compute a difference or ratio only from numbers in the context.",
        3,
        10,
        "all",
    ),
    "numeric_counting": Route(
        "numeric_counting",
        "The answer is a count or an amount: take the number stated for exactly what the question "
        "names, or count the items the context lists.",
        3,
        10,
        "all",
    ),
    "model_specific": Route(
        "model_specific",
        "The question is about one model: use only what the context says about that exact model "
        "name and size, not another size or version.",
        5,
        7,
        "all",
    ),
    "term_extraction": Route(
        "term_extraction",
        "The answer is a name or a term: copy it exactly as the context writes it.",
        5,
        7,
        "text",
    ),
    "general": Route("general", "", 5, 7, "text"),
}
TYPES: tuple[QuestionType, ...] = tuple(ROUTES)


def _any_of(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


_PATTERNS: dict[QuestionType, tuple[re.Pattern[str], ...]] = {
    "table_extraction": _any_of(
        r"\btables?\b",
        r"\bwhich of the (following|models|systems|methods)\b",
        r"\b(highest|lowest|largest|smallest|fastest|slowest)\b",
        r"\bdifference between\b",
    ),
    "score_extraction": _any_of(
        r"\b(scores?|accuracy|bleu|rouge|f1|perplexity|precision|recall)\b",
        r"\bpercent(age)?\b|%",
        r"\b(rate|ratio|factor|speedup|efficiency|effectiveness)\b",
        r"\bhow many times\b",
    ),
    "numeric_counting": _any_of(r"^\W*how many\b", r"\bnumber of\b", r"\bhow much\b", r"\bcount\b"),
    # A model named with a version or size: GPT-3, LLaMA-33B, Llama-3.1, Qwen 72B, 6.1B-parameter.
    "model_specific": (
        re.compile(r"\b[A-Za-z][A-Za-z.]*-\d[\w.]*"),
        re.compile(r"\b\d+(\.\d+)?[BM]\b"),
        re.compile(r"\b\d+(\.\d+)?[BM]-param"),
    ),
    "term_extraction": _any_of(
        r"\b(what|which) (is|was|are|were) the (term|name|acronym|abbreviation)\b",
        r"\b(what|which) (dataset|benchmark|term|method|metric|framework|tool|technique|library)\b",
        r"\b(is|are) (called|known as|termed)\b",
        r"\bstands? for\b",
        r"\bdefined as\b",
    ),
}


def _matches(kind: QuestionType, text: str) -> bool:
    return any(p.search(text) for p in _PATTERNS.get(kind, ()))


def detect_type(question: Question) -> QuestionType:
    """The question's type: the first of TYPES whose patterns match. A question with no
    unit that is no true/false statement asks for a name (term extraction) unless a
    pattern says otherwise; a true/false statement is general."""
    text = question.question
    if re.match(r"^\s*true(?: or |/)false\b", text, re.IGNORECASE):
        return "general"
    for kind in TYPES[:-1]:
        if _matches(kind, text):
            return kind
    if is_blank_value(question.answer_unit.strip()):
        return "term_extraction"
    return "general"


def route_for(question: Question) -> Route:
    return ROUTES[detect_type(question)]


def type_counts(questions: Sequence[Question]) -> dict[QuestionType, int]:
    """How many questions of each type (every type listed, in TYPES order)."""
    counts = dict.fromkeys(TYPES, 0)
    for q in questions:
        counts[detect_type(q)] += 1
    return counts


def search_config(question: Question, part: RetrievalPart) -> RetrievalConfig:
    """The search settings for `question`: with `content_routing = "question_type"`, its
    type decides whether table and figure nodes may enter the context."""
    if part.content_routing == "off":
        return part.search
    return replace(part.search, content=route_for(question).content)
