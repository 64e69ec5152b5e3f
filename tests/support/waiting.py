"""Waiting on a condition, not on the clock: a test polls what it waits for and fails, naming
it, when it does not come within the timeout."""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["wait_until"]


def wait_until(check: Callable[[], object], timeout: float = 15.0, what: str = "the condition") -> None:
    """Return as soon as `check()` is true; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(0.02)
