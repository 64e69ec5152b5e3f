"""The OpenAI-compatible endpoint: `/v1/models` lists the configs as models,
`/v1/chat/completions` answers the last user message with the config named by `model`.

The reply's content is the answer with `[1]`-style markers; the message also carries
`references` (what each marker cites) and, for documents with a URL, OpenAI's
`url_citation` annotations, so chat front ends (Open WebUI, the `openai` client) show the
sources. Streaming sends the chunks in OpenAI's shape, then `data: [DONE]`; while the
model works, SSE comment lines (`: planning`) keep the connection alive."""

from __future__ import annotations

import time
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from kohaku_rag.serving.api import read_json, service_of
from kohaku_rag.serving.errors import ApiError
from kohaku_rag.serving.sse import event, progress_stream

OWNER = "kohaku-lake"


async def models(request: Request) -> Response:
    service = service_of(request)
    data = [{"id": name, "object": "model", "created": 0, "owned_by": OWNER} for name in service.config_names()]
    return JSONResponse({"object": "list", "data": data})


def last_user_message(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages: give a list with at least one user message")
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            if isinstance(content, list):  # content parts: the text ones
                content = " ".join(
                    p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
                )
            if isinstance(content, str) and content.strip():
                return content
    raise ApiError(400, "messages: no user message with text to answer")


def message_of(answer: dict[str, Any]) -> dict[str, Any]:
    """The assistant message: content with [n] markers, references, url annotations."""
    references = [
        {
            "index": i,
            "doc_id": c["doc_id"],
            "node_id": c["node_id"],
            "page": c["page"],
            "title": c["title"],
            "url": c["url"],
            "quote": c["quote"],
        }
        for i, c in enumerate(answer["cited"], start=1)
    ]
    if answer["is_blank"]:
        content = "The documents do not answer this question."
    else:
        head = answer["answer"] or answer["value"]
        unit = answer["unit"] if answer["unit"] not in ("", "is_blank") else ""
        if unit and answer["value"] and unit not in head:
            head = f"{head} ({answer['value']} {unit})"
        markers = "".join(f"[{r['index']}]" for r in references)
        content = f"{head} {markers}".strip()
        if answer["explanation"] and answer["explanation"] != "is_blank":
            content += f"\n\n{answer['explanation']}"
    annotations = []
    for r in references:
        marker = f"[{r['index']}]"
        at = content.find(marker)
        if r["url"] and at >= 0:
            annotations.append(
                {
                    "type": "url_citation",
                    "url_citation": {
                        "url": r["url"],
                        "title": r["title"],
                        "start_index": at,
                        "end_index": at + len(marker),
                    },
                }
            )
    return {"role": "assistant", "content": content, "references": references, "annotations": annotations}


async def chat_completions(request: Request) -> Response:
    service = service_of(request)
    body = await read_json(request)
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ApiError(400, "model: give a config name (GET /v1/models lists them)")
    question = service.check_question(last_user_message(body))
    name = service.named_config(model or None).name
    completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    created = int(time.time())
    if body.get("stream") is not True:
        answer = await service.ask(question, name, None, lambda _p: None, via="openai")
        message = message_of(answer)
        return JSONResponse(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": name,
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            }
        )
    service.gate(service.named_config(name).config).check_room()

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        payload = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": name,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return event(None, payload)

    async def events() -> Any:
        yield chunk({"role": "assistant", "content": ""})
        async for kind, payload in progress_stream(lambda say: service.ask(question, name, None, say, via="openai")):
            if kind == "progress" and "stage" in payload:  # a comment: clients ignore it, proxies see life
                yield f": {payload['stage']}\n\n"
            elif kind == "progress":  # the model's raw JSON reply as it is written: not the message content
                continue
            elif kind == "done":
                message = message_of(payload)
                yield chunk({"content": message["content"]})
                yield chunk({"references": message["references"], "annotations": message["annotations"]}, "stop")
            else:
                yield event(None, payload)
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})


ROUTES = [
    Route("/v1/models", models, methods=["GET"]),
    Route("/v1/chat/completions", chat_completions, methods=["POST"]),
]
