"""KohakuRAG's query planner: the LLM rewrites a question into a few search queries.

The reply is constrained to a JSON object `{"queries": [...]}` by a schema. The original
question is always the first query, so a poor plan can add recall but never lose the
question's own hits; a reply that is not the expected JSON falls back to the question alone.
A failed call (the endpoint down, a 401, any error) is not a plan: it raises, and the
question's retrieval is stored as failed and planned again by the next run.
"""

from __future__ import annotations

from dataclasses import dataclass

from kohaku_rag.llm import ChatModel, ChatRequest, Message
from kohaku_rag.llm.base import UnusableReply, extract_json, loads_json

# The planner prompt as of this number: bump it when it changes (stored retrievals are keyed by it).
PLAN_FORMAT = 2
SYSTEM = (
    "You write search queries for a keyword and semantic search over research papers about "
    "the energy use, carbon emissions and water use of AI. Reply with JSON only."
)


@dataclass(frozen=True)
class Plan:
    queries: tuple[str, ...]
    fallback: bool  # True when the LLM's reply was unusable and only the question is searched
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0


def plan_schema(n: int) -> dict[str, object]:
    return {
        "type": "object",
        "properties": {
            "queries": {
                "type": "array",
                "items": {"type": "string", "minLength": 3, "maxLength": 80},
                "minItems": 1,
                "maxItems": n,
            }
        },
        "required": ["queries"],
        "additionalProperties": False,
    }


# `split_entities`: a question combining figures of several models, papers or
# sources gets one query per entity, so each one's evidence is searched for on its own.
SPLIT_RULE = (
    "If the question compares or combines figures of two or more models, systems, papers or "
    "sources, write one query per model, system, paper or source, each naming it. "
)


def plan_request(question: str, max_queries: int, split_entities: bool = False) -> ChatRequest:
    extra = max(max_queries - 1, 1)
    user = (
        f"Question: {question}\n\n"
        f"Write {extra} short search queries that would find the passage answering this question. "
        "Use other words than the question: synonyms, the likely name of the measured quantity, "
        "model or hardware names, units. Spell out abbreviations (and give the abbreviation for "
        "a spelled-out name). If the question asks several things, give each part its own query. "
        f"{SPLIT_RULE if split_entities else ''}"
        'Reply as {"queries": ["...", "..."]}.'
    )
    return ChatRequest(
        (Message("system", SYSTEM), Message("user", user)),
        temperature=0.0,
        max_tokens=30 * extra + 20,
        seed=0,
        json_schema=plan_schema(extra),
    )


def parse_plan(question: str, text: str, max_queries: int) -> tuple[tuple[str, ...], bool]:
    """(queries, fallback): the question first, then distinct planned queries, at most n in all."""
    raw = extract_json(text)
    planned: list[str] = []
    ok = False
    if raw is not None:
        data = loads_json(raw)
        items = data.get("queries") if isinstance(data, dict) else None
        if isinstance(items, list) and all(isinstance(q, str) for q in items):
            planned = [q.strip() for q in items if q.strip()]
            ok = bool(planned)
    queries = [question]
    seen = {question.strip().lower()}
    for q in planned:
        if q.lower() not in seen and len(queries) < max_queries:
            seen.add(q.lower())
            queries.append(q)
    return tuple(queries), not ok


def plan_queries(question: str, chat: ChatModel, max_queries: int, split_entities: bool = False) -> Plan:
    """Up to `max_queries` queries for `question` (the question itself always first)."""
    if max_queries <= 1:
        return Plan((question,), fallback=False)
    try:
        result = chat.complete(plan_request(question, max_queries, split_entities))
    except UnusableReply:
        # The model answered, unusably (asking again gives the same): search with the question
        # alone. Any other error is a failed call, not a plan: the caller stores it as failed.
        return Plan((question,), fallback=True)
    queries, fallback = parse_plan(question, result.text, max_queries)
    return Plan(queries, fallback, result.prompt_tokens, result.completion_tokens, result.seconds)
