"""A real uvicorn serving an ASGI app on 127.0.0.1 at a free port, in a thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import uvicorn

# anyio is a pytest plugin, so pytest's assertion rewriter compiles each module anyio imports
# lazily on first use; a first use inside the server's thread (Starlette's FileResponse and
# `anyio.open_file`) while another thread compiles too trips CPython 3.11's compiler ("AST
# constructor recursion depth mismatch"). Every lazy name is resolved here, in the importing thread.
for _name in dir(anyio):
    if not _name.startswith("_"):
        getattr(anyio, _name)


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Yield the server's base URL (http://127.0.0.1:PORT) while it runs."""
    # proxy headers off and lifespan events on, as in `kohaku serve`: the app reads
    # X-Forwarded-For itself, and finishes its background work when the server stops
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", access_log=False, lifespan="auto", proxy_headers=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
