"""Turning a shared SQLite file to WAL mode when other processes may be opening it too.

SQLite answers `PRAGMA journal_mode=WAL` with "database is locked" at once, without calling
the busy handler, while another connection holds the file (two `kohaku serve` processes
opening a lake's new cache at the same moment). The switch is retried here until it
takes or the wait runs out; once one connection has made the file WAL, the mode is
stored in the file and every later switch is a no-op.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

import apsw

__all__ = ["use_wal"]


def _is_busy(error: BaseException) -> bool:
    """Whether `error` is SQLite's "database is locked", from apsw or the standard module."""
    if isinstance(error, apsw.BusyError):
        return True
    return isinstance(error, sqlite3.OperationalError) and error.sqlite_errorcode == sqlite3.SQLITE_BUSY


def use_wal(execute: Callable[[str], object], wait_s: float = 30.0) -> None:
    """Run `PRAGMA journal_mode=WAL` through `execute`, retrying while the file is locked."""
    deadline = time.monotonic() + wait_s
    pause = 0.005
    while True:
        try:
            execute("PRAGMA journal_mode=WAL")
            return
        except (apsw.BusyError, sqlite3.OperationalError) as error:
            if not _is_busy(error) or time.monotonic() >= deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.2)
