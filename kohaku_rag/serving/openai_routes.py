"""The OpenAI-compatible endpoint: `/v1/models` lists the configs as models (a broken
config file marked `available: false` with the reason), `/v1/chat/completions` answers the
last user message with the config named by `model`; the messages before it are the
conversation a follow-up leans on (answering/followup.py rewrites it into a standalone
question).

The reply's content is the explanation, then the answer with `[1]`-style markers (in the
order the model writes them, so a stream is read as it is written); the message also carries
`references` (what each marker cites) and, for documents with a URL, OpenAI's
`url_citation` annotations, so chat front ends (Open WebUI, the `openai` client) show the
sources. Streaming sends the chunks in OpenAI's shape, then `data: [DONE]`: the explanation
and then the answer are typed as the model writes them (those fields of its JSON reply,
from the reply sink), the markers and the references follow when it is done; while the model works,
SSE comment lines (`: planning`) keep the connection alive. `usage` counts the answering
calls' tokens (0 for an answer served again from the stored answers); a stream sends it in
a last chunk with no choices when asked to (`stream_options: {"include_usage": true}`), as
OpenAI does."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from kohaku_rag.answering.followup import Turn
from kohaku_rag.serving.api import history_of, jobs_of, read_json, service_of, text_of
from kohaku_rag.serving.errors import ApiError
from kohaku_rag.serving.sse import event
from kohaku_rag.web_links import web_link

OWNER = "kohaku-lake"
CHAT_PATH = "/v1/chat/completions"
_CLOSED_EXPLANATION = re.compile(r'"explanation"\s*:\s*"(?:[^"\\]|\\.)*"')


async def models(request: Request) -> Response:
    service = service_of(request)
    data = []
    for config in await anyio.to_thread.run_sync(service.configs):
        model = {"id": config["name"], "object": "model", "created": 0, "owned_by": OWNER}
        if not config["available"]:  # listed, so a user sees why their model is missing
            model.update(available=False, error=config["error"])
        data.append(model)
    return JSONResponse({"object": "list", "data": data})


def conversation(body: dict[str, Any]) -> tuple[str, tuple[Turn, ...]]:
    """The last user message (the question) and the turns before it (a follow-up's history)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages: give a list with at least one user message")
    for at in range(len(messages) - 1, -1, -1):
        m = messages[at]
        if isinstance(m, dict) and m.get("role") == "user":
            content = text_of(m.get("content"))
            if content and content.strip():
                return content, history_of(messages[:at], "messages")
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
            "url": web_link(c["url"]),  # a stored answer may predate the rule
            "quote": c["quote"],
        }
        for i, c in enumerate(answer["cited"], start=1)
    ]
    if answer["is_blank"]:
        content = "The documents do not answer this question."
    else:
        head = answer["answer"] or answer["value"]
        unit = answer["unit"] if answer["unit"] not in (None, "", "is_blank") else ""
        if unit and answer["value"] and unit not in head:
            head = f"{head} ({answer['value']} {unit})"
        markers = "".join(f"[{r['index']}]" for r in references)
        content = f"{head} {markers}".strip()
        if answer["explanation"] and answer["explanation"] != "is_blank":
            content = f"{answer['explanation']}\n\n{content}"
    annotations = []
    for r in references:
        marker = f"[{r['index']}]"
        at = content.rfind(marker)  # the answer's markers close the content
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


def field_so_far(raw: str, field: str = "answer") -> str:
    """A string field of a JSON reply the model is still writing, as far as it goes."""
    found = re.search(rf'"{field}"\s*:\s*"', raw)
    if found is None:
        return ""
    rest, i = raw[found.end() :], 0
    while i < len(rest) and rest[i] != '"':
        if rest[i] == "\\":
            step = 6 if rest[i + 1 : i + 2] == "u" else 2
            if i + step > len(rest):
                break  # an escape cut in the middle: wait for the rest
            i += step
        else:
            i += 1
    try:
        text: str = json.loads(f'"{rest[:i]}"')
    except ValueError:
        return ""
    return text


def content_so_far(raw: str) -> str:
    """The message content (`message_of`'s order) of a reply being written: its explanation,
    then, once the explanation is complete, its answer (nothing before the explanation starts:
    in the value-first order the answer is written first, and is sent after it)."""
    if '"explanation"' not in raw:
        return ""
    explanation = field_so_far(raw, "explanation")
    if _CLOSED_EXPLANATION.search(raw) is None:
        return explanation
    answer = field_so_far(raw, "answer")
    return f"{explanation}\n\n{answer}" if explanation and answer else explanation or answer


class Typing:
    """The message content as the model writes it: the reply's explanation and answer, sent
    as they grow; each attempt (a retry starts at "answering" again) is read afresh, and only text
    that extends what was sent goes out (a sent piece cannot be taken back)."""

    def __init__(self) -> None:
        self.raw = ""
        self.sent = ""

    def stage(self, stage: str) -> None:
        if stage == "answering":
            self.raw = ""

    def reply(self, piece: str) -> str:
        self.raw += piece
        text = content_so_far(self.raw)
        if len(text) > len(self.sent) and text.startswith(self.sent):
            delta, self.sent = text[len(self.sent) :], text
            return delta
        return ""

    def rest(self, content: str) -> str:
        """What the final content adds to what was typed (all of it, after a break, when
        the answer differs from the text typed)."""
        if content.startswith(self.sent):
            return content[len(self.sent) :]
        return f"\n\n{content}"


def check_stream(body: dict[str, Any]) -> tuple[bool, bool]:
    """`stream`, and whether the stream ends with a usage chunk (`stream_options.include_usage`)."""
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(400, f"stream: give true or false, not {json.dumps(stream)[:40]}")
    options = body.get("stream_options")
    if options is None:
        return stream, False
    if not isinstance(options, dict):
        raise ApiError(400, 'stream_options: give an object such as {"include_usage": true}')
    if not stream:
        raise ApiError(400, "stream_options: only allowed with stream: true")
    include = options.get("include_usage", False)
    if not isinstance(include, bool):
        raise ApiError(400, f"stream_options.include_usage: give true or false, not {json.dumps(include)[:40]}")
    return stream, include


def usage_of(answer: dict[str, Any]) -> dict[str, int]:
    """OpenAI's usage object from an answer's token counts (an answer stored before they
    were recorded counts 0)."""
    used = answer.get("usage") or {}
    prompt, completion = int(used.get("prompt_tokens", 0)), int(used.get("completion_tokens", 0))
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def chat_completions(request: Request) -> Response:
    jobs = jobs_of(request)
    body = await read_json(request)
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise ApiError(400, "model: give a config name (GET /v1/models lists them)")
    stream, include_usage = check_stream(body)
    question, history = conversation(body)
    job = jobs.start(question, model or None, None, "openai", history)
    name = job.config
    completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
    created = int(time.time())
    if not stream:
        answered = await jobs.wait(job, request.is_disconnected)
        await jobs.delivered(job)
        message = message_of(answered.response)
        return JSONResponse(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": name,
                "answer_id": job.answer_id,
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": usage_of(answered.response),
            }
        )

    def chunk(delta: dict[str, Any] | None, finish: str | None = None, usage: dict[str, int] | None = None) -> str:
        payload: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": name,
            "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if include_usage:  # null on every chunk but the last, as OpenAI sends it
            payload["usage"] = usage
        return event(None, payload)

    async def events() -> AsyncIterator[str]:
        yield chunk({"role": "assistant", "content": ""})
        typing = Typing()
        async for kind, payload in jobs.follow(job):
            if kind == "progress" and "stage" in payload:  # a comment: clients ignore it, proxies see life
                typing.stage(payload["stage"])
                yield f": {payload['stage']}\n\n"
            elif kind == "progress":  # the model's JSON reply as it is written: its answer, typed
                delta = typing.reply(payload.get("reply", ""))
                if delta:
                    yield chunk({"content": delta})
            elif kind == "done":
                message = message_of(payload)
                rest = typing.rest(message["content"])
                if rest:
                    yield chunk({"content": rest})
                yield chunk({"references": message["references"], "annotations": message["annotations"]}, "stop")
                if include_usage:
                    yield chunk(None, usage=usage_of(payload))
                await jobs.delivered(job)
            else:
                yield event(None, payload)
        yield "data: [DONE]\n\n"

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})


ROUTES = [
    Route("/v1/models", models, methods=["GET"]),
    Route(CHAT_PATH, chat_completions, methods=["POST"]),
]
