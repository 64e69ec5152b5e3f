"""Abstention by support check: after an answer, one more one-token call asks whether the
context states that answer to the question; below a log-odds margin the answer becomes a
blank (`abstain = "unsupported"`).

Why a second call rather than the reply's own `is_blank`: the bundled 1.5B model never
abstains on its own (0 blanks in 133 train + dev answers, all 10 unanswerable questions
answered with a number the context states for something else). Asked about one proposed
answer, yes or no, its probabilities still separate a stated answer from a borrowed one,
the way they separate true from false statements (verdict.py).

Why the prompt opens like the answer prompt (the same system prompt, then the same
context): the answer call leaves that opening in the model's KV cache, so the check
evaluates only the question and the proposed answer (`reuse_prefix`), well under a second
with the bundled model, instead of the whole context again.
"""

from __future__ import annotations

from collections.abc import Sequence

from kohaku_rag.answering.prompt import format_context, system_prompt
from kohaku_rag.answering.qa_config import GenerationPart
from kohaku_rag.answers.normalise import is_blank_value
from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.llm import ChatRequest
from kohaku_rag.llm.base import one_word_request, word_logodds
from kohaku_rag.retrieval.context import ContextItem

__all__ = ["apply_support", "proposed_answer", "support_logodds", "support_request"]


def proposed_answer(answer: Answer) -> str:
    """The answer as the check shows it: its value with the unit when it has one."""
    value = answer.answer_value.strip() or answer.answer.strip()
    unit = answer.answer_unit.strip()
    return value if is_blank_value(unit) or not unit else f"{value} {unit}"


def support_request(
    question: Question, items: Sequence[ContextItem], answer: Answer, gen: GenerationPart
) -> ChatRequest:
    """One word, Yes or No, read as the reply's first token's probabilities (no sampling)."""
    user = (
        f"{format_context(items, gen.snippet_titles)}\n\nQuestion: {question.question}\n"
        f"Proposed answer: {proposed_answer(answer)}\n"
        "Does the context state this answer to this question? Reply with one word: Yes or No."
    )
    return one_word_request(system_prompt(gen), user, reuse_prefix=True)


def support_logodds(top_logprobs: Sequence[tuple[str, float]]) -> float | None:
    """log P(Yes) - log P(No) of the reply's first token; None when neither is listed."""
    return word_logodds(top_logprobs, "yes", "no")


def apply_support(answer: Answer, logodds: float | None, margin: float, unit: str) -> Answer:
    """A blank when the log-odds fall below the margin; no log-odds (a server without
    logprobs) keeps the answer, and an abstention stays one."""
    if answer.is_blank or logodds is None or logodds >= margin:
        return answer
    return Answer.blank(unit)
