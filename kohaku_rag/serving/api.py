"""The JSON API: health, search, ask (plain or streamed), documents, pages, configs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from kohaku_rag.answering.followup import Turn
from kohaku_rag.errors import IndexUnavailable
from kohaku_rag.lake.disk_full import nearly_full
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig
from kohaku_rag.serving.errors import DISK_FULL, ApiError
from kohaku_rag.serving.feedback import VERDICTS, QuestionSetWriter, feedback_set_path, keep_feedback, question_id
from kohaku_rag.serving.jobs import ANSWER_ID, AnswerJobs, Job
from kohaku_rag.serving.leases import TAKEN_OVER, job_of
from kohaku_rag.serving.limits import ClientAddress, ClientRate
from kohaku_rag.serving.request_json import parse_body
from kohaku_rag.serving.service import Answered, AnswerService
from kohaku_rag.serving.sse import event

MAX_BUDGET_CHARS = 50_000


async def read_json(request: Request) -> dict[str, Any]:
    """The request's JSON object (400 with the reason otherwise)."""
    body = parse_body(await request.body())
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
    """200 "ok" while the lake can be searched and answers kept; 503 with the reason when
    search would refuse (what its checks and the last read of the index's checksums found)
    or the lake's disk is full (a load balancer then stops sending questions to a process
    that can't answer them)."""
    service = service_of(request)
    documents = len(service.documents.ids())
    problem = await anyio.to_thread.run_sync(service.index_problem)
    if problem is not None:
        return JSONResponse({"status": "index unavailable", "error": problem, "documents": documents}, 503)
    if nearly_full(service.lake.root):  # answers and verdicts could not be kept
        return JSONResponse({"status": "disk full", "error": DISK_FULL, "documents": documents}, 503)
    return JSONResponse({"status": "ok", "documents": documents})


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
    try:
        items = service.rag().search(question, budget_chars=budget, config=cfg)
    except IndexUnavailable as exc:
        raise ApiError(503, service.lake_relative(str(exc)), code="index_unavailable") from exc
    return JSONResponse({"context": [service.answer_json.context_item(i) for i in items], "config": named.name})


def wants_stream(request: Request, body: dict[str, Any]) -> bool:
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise ApiError(400, f"stream: give true or false, not {json.dumps(stream)[:40]}")
    return stream is True or "text/event-stream" in request.headers.get("accept", "")


MAX_TURN_CHARS = 20_000  # of each earlier turn kept (the follow-up rewrite reads far less of it)
KEEP_TURNS = 12  # the last turns kept: rewriting a follow-up needs only the recent ones


def history_of(raw: object, where: str) -> tuple[Turn, ...]:
    """A conversation's earlier turns: [{"role": "user" | "assistant", "content": str}, ...]
    (other roles, such as a chat client's system prompt, are left out). Any number of
    messages of any length (a chat front end sends the whole conversation, however long):
    only the last `KEEP_TURNS` turns are kept, each cut to its first `MAX_TURN_CHARS`
    characters, so a long chat is answered from its recent turns, never refused for length
    (the body cap bounds what a request may send at all)."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ApiError(400, f"{where}: give a list of {{role, content}} messages")
    turns = []
    for i, m in enumerate(raw):
        if not isinstance(m, dict):
            raise ApiError(400, f"{where}[{i}]: give an object {{role, content}}")
        content = text_of(m.get("content"))
        if content is None:
            raise ApiError(400, f"{where}[{i}].content: give text")
        if m.get("role") in ("user", "assistant") and content.strip():
            turns.append(Turn(m["role"], content[:MAX_TURN_CHARS]))
    return tuple(turns[-KEEP_TURNS:])


def text_of(content: object) -> str | None:
    """A message's text: a string, or OpenAI's content parts (their text parts)."""
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content if isinstance(content, str) else None


def jobs_of(request: Request) -> AnswerJobs:
    jobs: AnswerJobs = request.app.state.jobs
    return jobs


async def ask(request: Request) -> Response:
    """Start (or join) the answer to a question. Streamed: an `answer` event with its id,
    progress events, then `done` or `error`. Plain: the answer as JSON with its id."""
    jobs = jobs_of(request)
    body = await read_json(request)
    stream = wants_stream(request, body)
    history = history_of(body.get("history"), "history")
    job = jobs.start(body.get("question"), optional_str(body, "config"), optional_str(body, "unit"), "api", history)
    if not stream:
        answered = await jobs.wait(job, request.is_disconnected)
        await jobs.delivered(job)
        return JSONResponse(answered.response)
    return answer_stream(jobs, job)


def answer_stream(jobs: AnswerJobs, job: Job) -> StreamingResponse:
    """A job's events as SSE, from its start (a client that reconnects sees the stages again)."""

    async def events() -> AsyncIterator[str]:
        yield event("answer", {"answer_id": job.answer_id, "question": job.question, "config": job.config})
        async for kind, payload in jobs.follow(job):
            if "standalone_question" in payload and kind == "progress":
                kind = "answer"  # the follow-up as it is answered ("answered as: ...")
                payload = {"answer_id": job.answer_id, "question": job.question, "config": job.config, **payload}
            yield event(kind, payload)
            if kind == "done":
                await jobs.delivered(job)

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})


async def answer(request: Request) -> Response:
    """An answer by id: the answer once done (200), its progress while it runs (202), or
    (asked as SSE: `Accept: text/event-stream` or `?stream=true`) its events from the start."""
    jobs = jobs_of(request)
    answer_id = request.path_params["answer_id"]
    job = jobs.get(answer_id)
    if job is None:
        served = await anyio.to_thread.run_sync(lambda: jobs.service.served_answer(answer_id))
        if served is None and ANSWER_ID.match(answer_id):
            return await answer_elsewhere(request, jobs, answer_id)
        if served is None:
            raise ApiError(404, f"no answer {answer_id[:40]!r} (answers are kept while the server runs, "
                           "and once delivered in served_answers)")  # fmt: skip
        if "text/event-stream" in request.headers.get("accept", "") or request.query_params.get("stream") == "true":
            done = event("answer", {"answer_id": answer_id, "question": served["question"], "config": served["config"]})
            return Response(done + event("done", served), media_type="text/event-stream")
        return JSONResponse(served)
    if "text/event-stream" in request.headers.get("accept", "") or request.query_params.get("stream") == "true":
        return answer_stream(jobs, job)
    if job.answered is not None:
        await jobs.delivered(job)
        return JSONResponse(job.answered.response)
    if job.error is not None:
        raise job.error
    return JSONResponse(job.status(), status_code=202)


RESUME_POLL_SECONDS = 0.5
RESUME_WAIT_SECONDS = 600


def wants_events(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "") or request.query_params.get("stream") == "true"


async def answer_elsewhere(request: Request, jobs: AnswerJobs, answer_id: str) -> Response:
    """An answer another server process on the lake started: its answer once done (this
    process delivers it), 202 while it runs, or as SSE its `done` once it arrives. A job
    whose process died is taken over by a live one, or fails with the reason, once its lease
    runs out (leases.py); the client hears which (`taken_over` while it runs again)."""
    lake = jobs.service.lake
    jobs.keep_leases()
    found = await anyio.to_thread.run_sync(lambda: job_of(lake, answer_id))
    if found is None:
        raise ApiError(404, f"no answer {answer_id[:40]!r} (answers are kept while the server runs, "
                       "and once delivered in served_answers)")  # fmt: skip
    head = {"answer_id": answer_id, "question": found["question"], "config": found["config"]}
    if not wants_events(request):
        if found["state"] != "running":
            return await _finished_elsewhere(jobs, found)
        running = {**head, "status": "running", "stage": "answering on another server process", "place": None}
        return JSONResponse({**running, **_taken_over(found)}, 202)

    async def events() -> AsyncIterator[str]:
        yield event("answer", head)
        yield event("progress", {"stage": "answering on another server process", **_taken_over(found)})
        current: dict[str, Any] | None = found
        runs = found["runs"]
        for _ in range(int(RESUME_WAIT_SECONDS / RESUME_POLL_SECONDS)):
            if current is None or current["state"] != "running":
                break
            if current["runs"] != runs:  # its process died: another one answers it again
                runs = current["runs"]
                yield event("progress", {"stage": "taken over", **_taken_over(current)})
            await asyncio.sleep(RESUME_POLL_SECONDS)
            current = await anyio.to_thread.run_sync(lambda: job_of(lake, answer_id))
        if current is None or current["state"] == "running":
            yield event("error", {"error": {"message": "the answer did not arrive in time; ask again",
                                            "type": "timeout", "code": 504}})  # fmt: skip
        elif current["state"] == "error":
            yield event("error", current["response"])
        else:
            response = await _deliver_elsewhere(jobs, current)
            yield event("done", response)

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})


def _taken_over(found: dict[str, Any]) -> dict[str, str]:
    """`{"taken_over": why}` for a job answered again after its first process died, else {}."""
    return {"taken_over": TAKEN_OVER} if (found.get("runs") or 1) > 1 else {}


async def _deliver_elsewhere(jobs: AnswerJobs, found: dict[str, Any]) -> dict[str, Any]:
    response: dict[str, Any] = found["response"]
    question, unit, config, config_hash, index_version = found["key"]
    answered = Answered((question, unit, config, config_hash, index_version), response)
    await anyio.to_thread.run_sync(lambda: jobs.service.deliver(answered, "api"))
    return response


async def _finished_elsewhere(jobs: AnswerJobs, found: dict[str, Any]) -> Response:
    if found["state"] == "error":
        error = found["response"]["error"]
        return JSONResponse(found["response"], status_code=int(error.get("code") or 500))
    return JSONResponse(await _deliver_elsewhere(jobs, found))


FEEDBACK_LIMITS = {"correct_value": 200, "correct_unit": 100, "correct_ref": 200, "comment": 2000}


async def feedback(request: Request) -> Response:
    """A verdict on an answer: `{answer_id, verdict: "right" | "wrong", correct_value?,
    correct_unit?, correct_ref?, comment?}`. Kept in served_feedback; the `feedback` question
    set (qa/question_sets/feedback.csv) is rebuilt from it in the background (feedback.py),
    its new row waiting for review."""
    jobs = jobs_of(request)
    service = jobs.service
    rate: ClientRate = request.app.state.feedback_rate
    client: ClientAddress = request.app.state.client_address
    wait = rate.wait_seconds(client.of(request.scope))
    if wait:
        raise ApiError(429, f"feedback: at most {rate.per_minute} posts a minute from one client; "
                       f"try again in {wait:.0f} s", code="rate_limited",
                       headers={"Retry-After": str(max(1, round(wait)))})  # fmt: skip
    body = await read_json(request)
    answer_id = optional_str(body, "answer_id") or ""
    job = jobs.get(answer_id)
    response = job.answered.response if job is not None and job.answered is not None else None
    if response is None:
        response = await anyio.to_thread.run_sync(lambda: service.served_answer(answer_id))
    if response is None:
        await _no_answer_yet(service, job, answer_id)
        raise ApiError(404, f"answer_id: no answer {answer_id[:40]!r} to give feedback on")
    verdict = body.get("verdict")
    if verdict not in VERDICTS:
        raise ApiError(400, 'verdict: give "right" or "wrong"')
    fields: dict[str, str | None] = {}
    for key, limit in FEEDBACK_LIMITS.items():
        value = (optional_str(body, key) or "").strip()
        if len(value) > limit:
            raise ApiError(400, f"{key}: at most {limit} characters")
        fields[key] = value or None
    if fields["correct_ref"] and fields["correct_ref"] not in service.documents.ids():
        raise ApiError(400, f"correct_ref: no document {fields['correct_ref']!r} in the lake (GET /api/documents)")
    row = {
        "time": datetime.now(UTC),
        "answer_id": answer_id,
        "question": response["question"],
        "config": response["config"],
        "served_answer": response["answer"],
        "served_value": response["value"],
        "served_unit": response["unit"] or "is_blank",
        "served_refs": list(response["refs"]),
        "verdict": verdict,
        **fields,
    }
    limit = service.settings.feedback_per_answer
    kept = await anyio.to_thread.run_sync(lambda: keep_feedback(service.lake, row, limit))
    if not kept:
        raise ApiError(429, f"answer_id: this answer already has {limit} verdicts; no more are kept",
                       code="feedback_full")  # fmt: skip
    writer: QuestionSetWriter = request.app.state.feedback_set
    writer.request()  # the file follows in the background: a post never waits for a whole rebuild
    return JSONResponse(
        {
            "kept": True,
            "question_id": question_id(response["question"]),
            "question_set": service.lake_relative(str(feedback_set_path(service.lake))),
        }
    )


async def _no_answer_yet(service: AnswerService, job: Job | None, answer_id: str) -> None:
    """A 409 naming why a known question has no answer to judge: it is still being
    answered (here or on another process), or it failed (its process died, say)."""
    if job is not None and job.error is not None:
        raise ApiError(409, f"answer_id: this question was not answered ({job.error.message}); nothing to judge")
    if job is not None:
        raise ApiError(409, "answer_id: the answer is not ready yet; give feedback once it arrives")
    if not ANSWER_ID.match(answer_id):
        return
    found = await anyio.to_thread.run_sync(lambda: job_of(service.lake, answer_id))
    if found is not None and found["state"] == "error":
        why = (found["response"] or {}).get("error", {}).get("message", "it failed")
        raise ApiError(409, f"answer_id: this question was not answered ({why}); nothing to judge")
    if found is not None and found["state"] == "running":
        raise ApiError(409, "answer_id: the answer is not ready yet; give feedback once it arrives")


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
    value = _value_param(request)
    png = service.documents.render_page(
        request.path_params["doc_id"], page, highlight, service.settings.render_dpi, value, _more_values(request)
    )
    return Response(png, media_type="image/png", headers={"Cache-Control": "private, max-age=300"})


async def node_text(request: Request) -> Response:
    """A node's paragraph with its sentences marked (documents without pages, and the text
    shown beside a page image)."""
    node_id = request.query_params.get("highlight") or ""
    if not node_id:
        raise ApiError(400, "give ?highlight=<node_id>")
    docs = service_of(request).documents
    doc_id = request.path_params["doc_id"]
    return JSONResponse(docs.marked_text(doc_id, node_id, _value_param(request), _more_values(request)))


MAX_VALUES = 4


def _more_values(request: Request) -> tuple[str, ...]:
    """Further `?value=`s: the other cells a computed value was read from (table_cells.py)."""
    values = request.query_params.getlist("value")[1:]
    if len(values) >= MAX_VALUES or any(len(v) > 100 for v in values):
        raise ApiError(400, f"value: at most {MAX_VALUES} values of at most 100 characters")
    return tuple(v for v in values if v)


def _value_param(request: Request) -> str | None:
    """`?value=`: the answer's value, so a cited table marks the row stating it."""
    # the first: Starlette's `get` gives the last of repeated keys
    value = next(iter(request.query_params.getlist("value")), None) or None
    if value is not None and len(value) > 100:
        raise ApiError(400, "value: at most 100 characters")
    return value


async def configs(request: Request) -> Response:
    service = service_of(request)
    return JSONResponse({"configs": service.configs(), "default": service.default_config()})


ROUTES = [
    Route("/healthz", healthz, methods=["GET"]),
    Route("/api/search", search, methods=["POST"]),
    Route("/api/ask", ask, methods=["POST"]),
    Route("/api/answers/{answer_id}", answer, methods=["GET"]),
    Route("/api/feedback", feedback, methods=["POST"]),
    Route("/api/documents", documents, methods=["GET"]),
    Route("/api/documents/{doc_id}", document, methods=["GET"]),
    Route("/api/documents/{doc_id}/pages/{page}.png", page_png, methods=["GET"]),
    Route("/api/documents/{doc_id}/text", node_text, methods=["GET"]),
    Route("/api/configs", configs, methods=["GET"]),
]
