"""The bounded queue in front of an LLM backend.

The bundled model answers one prompt at a time, an HTTP backend up to its
`max_concurrent`; up to `queue_size` more requests wait their turn, and one more is
refused at once with a 429 and a Retry-After estimated from the recent answer times."""

from __future__ import annotations

import asyncio
import math
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from kohaku_rag.serving.errors import ApiError


class Gate:
    def __init__(self, concurrency: int, queue_size: int) -> None:
        self.concurrency = max(1, concurrency)
        self.queue_size = max(0, queue_size)
        self._slots = asyncio.Semaphore(self.concurrency)
        self._admitted = 0  # running + waiting
        self._recent: deque[float] = deque(maxlen=20)  # seconds of the last answers

    @property
    def waiting(self) -> int:
        return max(0, self._admitted - self.concurrency)

    def retry_after(self) -> int:
        """Seconds until a slot is likely free: the queue ahead times the typical answer time."""
        typical = sorted(self._recent)[len(self._recent) // 2] if self._recent else 10.0
        return max(1, math.ceil(typical * (self.waiting + 1) / self.concurrency))

    def check_room(self) -> None:
        """Refuse now (429) when a request could not even wait its turn."""
        if self._admitted >= self.concurrency + self.queue_size:
            raise ApiError(
                429,
                f"the model is busy ({self._admitted} questions in progress or waiting); try again shortly",
                headers={"Retry-After": str(self.retry_after())},
            )

    @asynccontextmanager
    async def slot(
        self, on_queued: Callable[[int], None] | None = None, refuse_when_full: bool = True
    ) -> AsyncIterator[None]:
        """Hold a slot while answering. A request that must wait hears its place in the
        queue (1: first to wait) through `on_queued` at once, before it waits. Without
        `refuse_when_full` it waits even when the queue is full (an answer taken over from a
        process that died, admitted once already)."""
        if refuse_when_full:
            self.check_room()
        place = max(0, self._admitted - self.concurrency + 1)
        self._admitted += 1
        try:
            if place and on_queued is not None:
                on_queued(place)
            async with self._slots:
                loop = asyncio.get_running_loop()
                started = loop.time()
                yield
                self._recent.append(loop.time() - started)
        finally:
            self._admitted -= 1
