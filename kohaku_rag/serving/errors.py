"""Every failure reaches a client as JSON `{"error": {"message", "type", "code"}}` (the
OpenAI shape, so chat clients show the message), never as a traceback."""

from __future__ import annotations

import logging
from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from kohaku_rag.errors import KohakuError
from kohaku_rag.lake.disk_full import is_disk_full, nearly_full
from kohaku_rag.serving.served_store import ServedStoreDamaged

log = logging.getLogger(__name__)


class ApiError(KohakuError):
    """A request the server refuses or cannot answer: HTTP status, message, headers."""

    def __init__(self, status: int, message: str, *, code: str = "", headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code or _CODES.get(status, "error")
        self.headers = headers or {}


_CODES = {
    400: "invalid_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    429: "queue_full",
    502: "backend_error",
}


def error_response(status: int, message: str, code: str = "", headers: dict[str, str] | None = None) -> JSONResponse:
    body = {"error": {"message": message, "type": code or _CODES.get(status, "error"), "code": status}}
    return JSONResponse(body, status_code=status, headers=headers)


async def on_api_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.message, exc.code, exc.headers)


async def on_http_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error_response(exc.status_code, str(exc.detail), headers=dict(exc.headers or {}))


DISK_FULL = (
    "the disk holding the lake is full: free space there, then ask again "
    "(what was kept so far is kept; nothing of this request was)"
)


def lake_failure(exc: BaseException, lake: Path | None = None) -> ApiError | None:
    """A failure of the disk under the lake or of its served store, as the 503 that says
    what to do (None: neither; the failure is unexpected). Given the `lake`, any failure
    while its disk is all but full counts as a full disk: SQLite may call it a "disk I/O
    error" when its journal can't grow."""
    if is_disk_full(exc, lake) or (lake is not None and nearly_full(lake)):
        return ApiError(503, DISK_FULL, code="disk_full")
    if isinstance(exc, ServedStoreDamaged):
        return ApiError(503, str(exc), code="store_damaged")
    return None


async def on_unexpected(request: Request, exc: Exception) -> Response:
    service = getattr(request.app.state, "service", None)
    refused = lake_failure(exc, service.lake.root if service is not None else None)
    if refused is not None:
        log.error("%s %s: %s", request.method, request.url.path, exc)
        return await on_api_error(request, refused)
    # The traceback goes to the server's log; the client learns only that it failed.
    log.exception("error serving %s %s", request.method, request.url.path, exc_info=exc)
    return error_response(500, f"internal error ({type(exc).__name__}); the server log has the details", "internal")


HANDLERS = {ApiError: on_api_error, HTTPException: on_http_error, Exception: on_unexpected}
