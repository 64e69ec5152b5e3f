"""Progress of long steps: "answered 12/41 ... (ETA 4m10s)" lines, and listeners (the CLI's
progress bar) told done / total as each item finishes.

A step names its progress with a `Ticker`; its lines go to the step's logger (INFO in a
Dagster run, so a long step never looks frozen in the UI), and every listener registered
in this process with `listening` sees (stage, done, total) too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Listener", "Ticker", "eta_lines", "format_eta", "listening"]

Listener = Callable[[str, int, int], None]  # (stage, done, total)

_listeners: list[Listener] = []
_lock = threading.Lock()


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Tell `listener` of every tick in this process while the block runs."""
    with _lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)


def format_eta(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Ticker:
    """`stage done/total detail (ETA ...)` per finished item; the ETA is the mean time per
    item so far × the items left."""

    def __init__(self, stage: str, total: int, emit: Callable[[str], None]) -> None:
        self.stage = stage
        self.total = total
        self.emit = emit
        self.done = 0
        self.started = time.perf_counter()

    def tick(self, detail: str = "") -> None:
        self.done += 1
        elapsed = time.perf_counter() - self.started
        left = self.total - self.done
        eta = f"ETA {format_eta(elapsed / self.done * left)}" if left else f"done in {format_eta(elapsed)}"
        self.emit(f"{self.stage} {self.done}/{self.total} {detail} ({eta})".replace("  ", " "))
        with _lock:
            listeners = list(_listeners)
        for listener in listeners:
            listener(self.stage, self.done, self.total)


def eta_lines(emit: Callable[[str], None]) -> Listener:
    """A listener that writes each tick as a line, "answered 12/133 (ETA 4m10s)": for a step
    that runs where its own log lines don't reach the terminal (a Dagster run in-process).
    A stage's clock starts when the listener is made or the previous stage ended."""
    clock = {"since": time.perf_counter()}

    def listener(stage: str, done: int, total: int) -> None:
        now = time.perf_counter()
        elapsed = now - clock["since"]
        left = total - done
        eta = f"ETA {format_eta(elapsed / done * left)}" if left else f"done in {format_eta(elapsed)}"
        emit(f"{stage} {done}/{total} ({eta})")
        if not left:
            clock["since"] = now

    return listener
