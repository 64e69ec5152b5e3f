"""The ask page: plain HTML, JS and CSS files of this package (no CDN, no build step)."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"


async def index(_request: Request) -> Response:
    return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


ROUTES = [
    Route("/", index, methods=["GET"]),
    Mount("/static", StaticFiles(directory=STATIC), name="static"),
]
