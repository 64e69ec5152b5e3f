"""Follow-up questions: the LLM rewrites a question that leans on earlier turns ("and for
run C?") into one that stands alone ("How much device energy did run C use?"), which is
then planned, retrieved and answered like any question.

Only the question is rewritten: the answer is still grounded in retrieved passages, never
in the conversation. A reply that is not the expected JSON, or is empty, keeps the question
as asked (a poor rewrite loses nothing the question did not already say)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kohaku_rag.llm import ChatModel, ChatRequest, Message
from kohaku_rag.llm.base import UnusableReply, extract_json, loads_json

MAX_TURNS = 6  # earlier messages read (the last ones): a follow-up leans on the recent turns
MAX_TURN_CHARS = 600  # of each, so a long answer does not crowd the question out
SYSTEM = (
    "You rewrite the last question of a conversation about research papers into a question "
    "that can be understood without the conversation. Reply with JSON only."
)


@dataclass(frozen=True)
class Turn:
    role: str  # "user" or "assistant"
    content: str


def rewrite_schema() -> dict[str, object]:
    return {
        "type": "object",
        "properties": {"question": {"type": "string", "minLength": 3, "maxLength": 400}},
        "required": ["question"],
        "additionalProperties": False,
    }


def rewrite_request(question: str, history: Sequence[Turn]) -> ChatRequest:
    lines = [
        f"{'User' if t.role == 'user' else 'Assistant'}: {' '.join(t.content.split())[:MAX_TURN_CHARS]}"
        for t in history[-MAX_TURNS:]
    ]
    user = (
        "Conversation so far:\n" + "\n".join(lines) + f"\n\nQuestion: {question}\n\n"
        "Rewrite the question so that it stands alone: replace words that point back into the "
        "conversation (it, that, the same, and for ...) with what they refer to, keep the quantity "
        "and unit it asks for, and do not answer it. If it already stands alone, repeat it. "
        'Reply as {"question": "..."}.'
    )
    return ChatRequest(
        (Message("system", SYSTEM), Message("user", user)),
        temperature=0.0,
        max_tokens=160,
        seed=0,
        json_schema=rewrite_schema(),
    )


@dataclass(frozen=True)
class Rewrite:
    """A follow-up as it will be answered; `failure` says why it is the question as typed
    when the rewrite failed ("" when it did not), so the asker is told rather than guessing."""

    question: str
    failure: str = ""


def rewrite_followup(question: str, history: Sequence[Turn], chat: ChatModel) -> Rewrite:
    """The question as it reads without the conversation (itself when there is none)."""
    if not history:
        return Rewrite(question)
    try:
        result = chat.complete(rewrite_request(question, history))
    except UnusableReply as exc:
        return Rewrite(question, f"the model's reply was unusable ({exc})")
    raw = extract_json(result.text)
    data = loads_json(raw) if raw is not None else None
    rewritten = data.get("question") if isinstance(data, dict) else None
    if not isinstance(rewritten, str) or len(rewritten.strip()) < 3:
        return Rewrite(question, "the model's reply held no rewritten question")
    return Rewrite(" ".join(rewritten.split()))


def standalone_question(question: str, history: Sequence[Turn], chat: ChatModel) -> str:
    """The question as it reads without the conversation (itself when there is none)."""
    return rewrite_followup(question, history, chat).question
