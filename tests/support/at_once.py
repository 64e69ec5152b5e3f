"""Opening one new file from several connections at the same moment, as several processes do
when they start on one lake: each opener runs in its own thread, released together by a
barrier, into a fresh folder each round."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Barrier
from typing import TypeVar

T = TypeVar("T")


def open_at_once(root: Path, open_and_use: Callable[[Path], T], openers: int = 6, rounds: int = 25) -> list[list[T]]:
    """Each round's results: `open_and_use(folder)` from `openers` threads started together."""
    results: list[list[T]] = []
    for round_ in range(rounds):
        folder = root / f"round{round_}"
        barrier = Barrier(openers)

        def opener(_: int, folder: Path = folder, barrier: Barrier = barrier) -> T:
            barrier.wait()
            return open_and_use(folder)

        with ThreadPoolExecutor(max_workers=openers) as pool:
            results.append(list(pool.map(opener, range(openers))))
    return results
