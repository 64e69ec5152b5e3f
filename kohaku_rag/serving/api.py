"""The JSON API: health, search, ask (plain or streamed), documents, pages, configs."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from kohaku_rag.retrieval.retrieval_config import RetrievalConfig
from kohaku_rag.serving.errors import ApiError
from kohaku_rag.serving.service import AnswerService
from kohaku_rag.serving.sse import event, progress_stream

MAX_BUDGET_CHARS = 50_000


async def read_json(request: Request) -> dict[str, Any]:
    """The request's JSON object (400 with the reason otherwise)."""
    raw = await request.body()
    try:
        body = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"the body is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object")
    return body


def optional_str(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise ApiError(400, f"{key}: give a string")
    return value


def service_of(request: Request) -> AnswerService:
    service: AnswerService = request.app.state.service
    return service


async def healthz(request: Request) -> Response:
    return JSONResponse({"status": "ok", "documents": len(service_of(request).documents.ids())})


async def search(request: Request) -> Response:
    service = service_of(request)
    body = await read_json(request)
    question = service.check_question(body.get("question"))
    budget = body.get("budget_chars")
    if budget is not None and (
        not isinstance(budget, int) or isinstance(budget, bool) or not 1 <= budget <= MAX_BUDGET_CHARS
    ):
        raise ApiError(400, f"budget_chars: an integer from 1 to {MAX_BUDGET_CHARS}")
    named = service.named_config(optional_str(body, "config"))
    cfg: RetrievalConfig = named.config.retrieval.search
    items = service.rag().search(question, budget_chars=budget, config=cfg)
    return JSONResponse({"context": [service.context_item(i) for i in items], "config": named.name})


def wants_stream(request: Request, body: dict[str, Any]) -> bool:
    return body.get("stream") is True or "text/event-stream" in request.headers.get("accept", "")


async def ask(request: Request) -> Response:
    service = service_of(request)
    body = await read_json(request)
    question = service.check_question(body.get("question"))
    config, unit = optional_str(body, "config"), optional_str(body, "unit")
    if not wants_stream(request, body):
        return JSONResponse(await service.ask(question, config, unit, lambda _p: None))
    service.gate(service.named_config(config).config).check_room()  # a 429 before the stream starts

    async def events() -> Any:
        async for kind, payload in progress_stream(lambda say: service.ask(question, config, unit, say)):
            yield event(kind, payload)

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})


async def documents(request: Request) -> Response:
    docs = service_of(request).documents
    out = []
    for doc_id in docs.ids():
        info = docs.info(doc_id)
        out.append({"doc_id": doc_id, "title": info.title, "url": info.url, "format": info.format, "pages": info.pages})
    return JSONResponse({"documents": out})


async def document(request: Request) -> Response:
    docs = service_of(request).documents
    info = docs.info(request.path_params["doc_id"])
    return JSONResponse(
        {
            "doc_id": info.doc_id,
            "title": info.title,
            "url": info.url,
            "format": info.format,
            "pages": info.pages,
            "sections": docs.sections(info.doc_id),
        }
    )


def _page_number(raw: str) -> int:
    if not raw.isdigit() or len(raw) > 6:
        raise ApiError(400, f"page {raw!r}: give a page number (1, 2, ...)")
    return int(raw)


async def page_png(request: Request) -> Response:
    service = service_of(request)
    page = _page_number(request.path_params["page"])
    highlight = request.query_params.get("highlight") or None
    png = service.documents.render_page(request.path_params["doc_id"], page, highlight, service.settings.render_dpi)
    return Response(png, media_type="image/png", headers={"Cache-Control": "private, max-age=300"})


async def node_text(request: Request) -> Response:
    """A node's paragraph with its sentences marked (documents without pages, and the text
    shown beside a page image)."""
    node_id = request.query_params.get("highlight") or ""
    if not node_id:
        raise ApiError(400, "give ?highlight=<node_id>")
    return JSONResponse(service_of(request).documents.marked_text(request.path_params["doc_id"], node_id))


async def configs(request: Request) -> Response:
    service = service_of(request)
    return JSONResponse({"configs": service.configs(), "default": service.default_config()})


ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/api/search", search, methods=["POST"]),
    Route("/api/ask", ask, methods=["POST"]),
    Route("/api/documents", documents, methods=["GET"]),
    Route("/api/documents/{doc_id}", document, methods=["GET"]),
    Route("/api/documents/{doc_id}/pages/{page}.png", page_png, methods=["GET"]),
    Route("/api/documents/{doc_id}/text", node_text, methods=["GET"]),
    Route("/api/configs", configs, methods=["GET"]),
]
