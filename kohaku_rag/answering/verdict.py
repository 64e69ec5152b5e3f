"""A true/false statement's verdict from probabilities: one more one-token call over the
same context; log P(True) - log P(False) must reach a margin (a 1.5B model's reply calls
nearly every on-topic statement true; its probabilities still separate them).

Why the verdict prompt opens like the answer prompt (the same system prompt, then the same
context): the answer call leaves that opening in the model's KV cache, so the verdict
evaluates only the statement and its one-line question (about 40 tokens) instead of the
whole context again (`reuse_prefix`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from kohaku_rag.answering.prompt import format_context, system_prompt
from kohaku_rag.answering.qa_config import GenerationPart
from kohaku_rag.answers.answer_forms import TRUE_FALSE_PREFIX
from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.llm import ChatRequest
from kohaku_rag.llm.base import one_word_request, word_logodds
from kohaku_rag.retrieval.context import ContextItem


def statement_of(question: Question) -> str:
    """ "True or False: X" -> "X"."""
    return TRUE_FALSE_PREFIX.sub("", question.question, count=1).strip()


def verdict_request(question: Question, items: Sequence[ContextItem], gen: GenerationPart) -> ChatRequest:
    """One word, True or False, as the reply's first token's probabilities (no sampling)."""
    user = (
        f"{format_context(items, gen.snippet_titles)}\n\nStatement: {statement_of(question)}\n"
        "According to the context, is the statement true or false? Reply with one word: True or False."
    )
    return one_word_request(system_prompt(gen), user, reuse_prefix=True)


def verdict_logodds(top_logprobs: Sequence[tuple[str, float]]) -> float | None:
    """log P(True) - log P(False) of the reply's first token; None when neither is listed."""
    return word_logodds(top_logprobs, "true", "false")


def apply_verdict(answer: Answer, logodds: float | None, margin: float) -> Answer:
    """The statement is true when the log-odds reach the margin; an abstention stays one."""
    if answer.is_blank or logodds is None:
        return answer
    true = logodds >= margin
    return dataclasses.replace(answer, answer="True" if true else "False", answer_value="1" if true else "0")
