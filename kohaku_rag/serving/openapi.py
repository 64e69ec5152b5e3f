"""The API's OpenAPI description, declared once by hand (the routes are few and plain
Starlette; a test checks that every route is described)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


def _obj(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": props}


STR = {"type": "string"}
INT = {"type": "integer"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}
NULL_I = {"type": ["integer", "null"]}
STRS = {"type": "array", "items": STR}

ERROR = _obj(["error"], error=_obj(["message", "type", "code"], message=STR, type=STR, code=INT))
CONTEXT_ITEM = _obj(
    ["doc_id", "node_id", "kind", "page", "score", "text", "title"],
    doc_id=STR,
    node_id=STR,
    kind=STR,
    page=NULL_I,
    score=NUM,
    text=STR,
    title=STR,
)
CITED = _obj(
    ["doc_id", "node_id", "page", "title", "url", "text", "quote"],
    doc_id=STR,
    node_id=STR,
    sentence_id=STR,
    page=NULL_I,
    section=STR,
    states_value=BOOL,
    title=STR,
    url=STR,
    text=STR,
    quote=STR,
    # a cited table's cell stating the value, or null
    cell={
        "anyOf": [_obj(["table", "row", "column"], table=STR, row=STR, column=STR), {"type": "null"}],
    },
    # every cell the value was read or computed from (table_cells = "named"), each named
    cells={"type": "array", "items": _obj(["table", "row", "column"], table=STR, row=STR, column=STR)},
    # what a page highlight marks in this passage: the value, or the cells it was read from
    highlight_values=STRS,
)
ANSWER = _obj(
    ["answer", "value", "unit", "refs", "explanation", "cited", "seconds", "config"],
    question=STR,
    answer=STR,
    value=STR,
    unit={"type": ["string", "null"]},  # null when no unit was asked
    refs=STRS,
    rewrite_failed=STR,
    explanation=STR,
    is_blank=BOOL,
    # why there is no answer, when the reply's value was not of the asked form (else null)
    abstained_because={"type": ["string", "null"]},
    # whether the cited passages state the value; null for an abstention
    support={"anyOf": [_obj(["stated", "note"], stated=BOOL, note=STR), {"type": "null"}]},
    cited={"type": "array", "items": CITED},
    context={"type": "array", "items": CONTEXT_ITEM},
    raw={"type": "array", "items": {"type": "object"}},
    seconds=NUM,
    queued_seconds=NUM,
    config=STR,
    stored=BOOL,
    answer_id=STR,
    usage=_obj(
        ["prompt_tokens", "completion_tokens"],
        prompt_tokens=INT,
        # of prompt_tokens, those the model evaluated (the rest reused from a KV state); null: unknown
        prompt_tokens_evaluated=NULL_I,
        completion_tokens=INT,
    ),
)
DOCUMENT = _obj(
    ["doc_id", "title", "url", "format", "pages"],
    doc_id=STR,
    title=STR,
    url=STR,
    format=STR,
    pages=NULL_I,
    sections={"type": "array", "items": _obj(["node_id", "title"], node_id=STR, title=STR, page=NULL_I)},
)


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _op(summary: str, ok: dict[str, Any], body: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    responses: dict[str, Any] = {"200": {"description": "OK", **ok}}
    for code, why in (
        ("400", "bad request"),
        ("401", "missing or wrong API key"),
        ("404", "not found"),
        ("413", "body too large"),
        ("429", "queue full (Retry-After)"),
        ("502", "the LLM failed"),
    ):
        responses[code] = {"description": why, **_json({"$ref": "#/components/schemas/Error"})}
    op: dict[str, Any] = {"summary": summary, "responses": responses, **extra}
    if body is not None:
        op["requestBody"] = {"required": True, **_json(body)}
    return op


_DOC_ID = {"name": "doc_id", "in": "path", "required": True, "schema": STR}
_HIGHLIGHT = {"name": "highlight", "in": "query", "required": False, "schema": STR, "description": "a node id"}
_EVENTS = {
    "text/event-stream": {
        "schema": STR,
        "description": "progress events (a stage, or `reply`: the model's reply text as it is written), "
        "then done (or error)",
    }
}

SCHEMA: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {
        "title": "kohaku serve",
        "version": "1",
        "description": "Answers from a kohaku-lake index, with evidence.",
    },
    "components": {
        "schemas": {"Error": ERROR, "Answer": ANSWER, "ContextItem": CONTEXT_ITEM, "Document": DOCUMENT},
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
    },
    "security": [{"bearer": []}],
    "paths": {
        "/healthz": {
            "get": _op("Health and document count", _json(_obj(["status", "documents"], status=STR, documents=INT)))
        },
        "/api/search": {
            "post": _op(
                "The context an answerer would see",
                _json(_obj(["context"], context={"type": "array", "items": CONTEXT_ITEM}, config=STR)),
                _obj(["question"], question=STR, budget_chars=INT, config=STR),
            )
        },
        "/api/ask": {
            "post": _op(
                "Answer a question (stream: an `answer` event with the answer_id, progress events queued, "
                "planning, retrieving, answering, the reply as the model writes it, then done)",
                {"content": {**_json(ANSWER)["content"], **_EVENTS}},
                _obj(["question"], question=STR, config=STR, unit=STR, stream=BOOL),
            )
        },
        "/api/answers/{answer_id}": {
            "get": _op(
                "An answer by its id: the answer (200), or while it runs its progress (202, with `taken_over` "
                "when the process answering it died and another answers it again; 503 `owner_lost` with the "
                "reason when it is not answered again); as SSE (Accept: text/event-stream or ?stream=true) "
                "its events from the start",
                {"content": {**_json(ANSWER)["content"], **_EVENTS}},
                parameters=[{"name": "answer_id", "in": "path", "required": True, "schema": STR}],
            )
        },
        "/api/feedback": {
            "post": _op(
                "A verdict on an answer (right, or wrong with an optional correction); kept in served_feedback "
                "and added to the feedback question set for review",
                _json(_obj(["kept", "question_id", "question_set"], kept=BOOL, question_id=STR, question_set=STR)),
                _obj(
                    ["answer_id", "verdict"],
                    answer_id=STR,
                    verdict={"type": "string", "enum": ["right", "wrong"]},
                    correct_value=STR,
                    correct_unit=STR,
                    correct_ref=STR,
                    comment=STR,
                ),
            )
        },
        "/api/documents": {
            "get": _op(
                "The indexed documents", _json(_obj(["documents"], documents={"type": "array", "items": DOCUMENT}))
            )
        },
        "/api/documents/{doc_id}": {
            "get": _op("One document: title, url, pages, sections", _json(DOCUMENT), parameters=[_DOC_ID])
        },
        "/api/documents/{doc_id}/pages/{page}.png": {
            "get": _op(
                "A PDF page as PNG with the node's sentences highlighted",
                {"content": {"image/png": {"schema": {"type": "string", "format": "binary"}}}},
                parameters=[_DOC_ID, {"name": "page", "in": "path", "required": True, "schema": INT}, _HIGHLIGHT],
            )
        },
        "/api/documents/{doc_id}/text": {
            "get": _op(
                "A node's paragraph with its sentences marked",
                _json(
                    _obj(["parts"], parts={"type": "array", "items": _obj(["text", "marked"], text=STR, marked=BOOL)})
                ),
                parameters=[_DOC_ID, {**_HIGHLIGHT, "required": True}],
            )
        },
        "/api/configs": {
            "get": _op(
                "Config names and leaderboard scores",
                _json(_obj(["configs"], configs={"type": "array", "items": {"type": "object"}})),
            )
        },
        "/v1/models": {"get": _op("OpenAI: the configs as models", _json({"type": "object"}))},
        "/v1/chat/completions": {
            "post": _op(
                "OpenAI: answer the last user message with the config named by model",
                {"content": {**_json({"type": "object"})["content"], **_EVENTS}},
                _obj(["messages"], model=STR, messages={"type": "array", "items": {"type": "object"}}, stream=BOOL),
            )
        },
        "/openapi.json": {"get": _op("This description", _json({"type": "object"}))},
    },
}


async def openapi(_request: Request) -> Response:
    return JSONResponse(SCHEMA)


ROUTES = [Route("/openapi.json", openapi, methods=["GET"])]
