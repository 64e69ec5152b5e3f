"""Where a reply's text goes while the model is still writing it (the ask page shows it live).

Why a context variable: between the server and the model sit the planner, the retriever,
the answerer and its retries; a context variable reaches the model call made in the same
thread without a callback threaded through every layer, and calls made anywhere else (an
evaluation run, the CLI) have no sink and are unchanged. A backend that cannot stream, or a
reply served from the response cache, simply sends nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["ReplySink", "reply_sink", "streaming_reply"]

ReplySink = Callable[[str], None]

_SINK: ContextVar[ReplySink | None] = ContextVar("kohaku_reply_sink", default=None)


@contextmanager
def streaming_reply(sink: ReplySink) -> Iterator[None]:
    """Inside this block, model calls made in this thread send their reply text to `sink`
    piece by piece as it is generated."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


def reply_sink() -> ReplySink | None:
    """The sink of the current block, if any (backends call it)."""
    return _SINK.get()
