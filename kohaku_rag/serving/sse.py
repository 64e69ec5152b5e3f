"""Server-sent events: run an answer while its progress events stream to the client."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from kohaku_rag.serving.errors import ApiError

log = logging.getLogger(__name__)
Work = Callable[[Callable[[dict[str, Any]], None]], Awaitable[dict[str, Any]]]


def event(name: str | None, data: Any) -> str:
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {json.dumps(data)}\n\n"


async def progress_stream(work: Work) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """Yield ("progress", {...}) as the work reports, then ("done", result) or
    ("error", {"error": {...}}). The work keeps running if the client leaves (its answer is
    stored and served again at once)."""
    queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue()
    task = asyncio.ensure_future(work(lambda p: queue.put_nowait(("progress", p))))

    def finished(t: asyncio.Future[dict[str, Any]]) -> None:
        queue.put_nowait(("end", {}))
        if not t.cancelled():
            t.exception()  # retrieved: a client that left early leaves no "never retrieved" warning

    task.add_done_callback(finished)
    while True:
        kind, payload = await queue.get()
        if kind == "end":
            break
        yield kind, payload
    try:
        yield "done", task.result()
    except ApiError as exc:
        yield "error", {"error": {"message": exc.message, "type": exc.code, "code": exc.status}}
    except Exception as exc:  # the traceback stays in the server log, as for a plain request
        log.error("answer failed", exc_info=exc)
        yield "error", {"error": {"message": f"internal error ({type(exc).__name__})", "type": "internal", "code": 500}}
