"""One writer per lake: an OS file lock that every command and run writing the indexes or
the answering tables holds.

Why a lock at all: two `kohaku index` assembling at once, or a re-index while `kohaku eval`
reads the retrievals of the index it started with, each leave the other with files that
vanished or changed under it. Readers (search, ask, the UI) never take it: every file they
read is replaced atomically, so they see the old or the new, never half.

The lock is `fcntl.flock` on `<lake>/.lake.lock`. The OS drops it when its process dies, so
a lock left by a killed process is simply free; the file's text (pid, host, since, what)
names the holder for whoever waits, and is cleared on release, so a holder that died shows
as "left by pid N". It is re-entrant within a process (the CLI holds it around a run whose
assets take it again in the same process), and a run whose tags carry the holder's token
(`LOCK_TOKEN_TAG`, set by the command that holds it) joins the holder instead of waiting
for it: the steps of a CLI run executed by Celery workers, for example.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from kohaku_rag.errors import KohakuError

__all__ = [
    "LOCK_FILE",
    "LOCK_TOKEN_TAG",
    "LakeBusy",
    "LockHolder",
    "current_holder",
    "held_token",
    "hold_lake",
    "is_alive",
]

LOCK_FILE = ".lake.lock"
# The run tag carrying the lock holder's token to the steps of its runs.
LOCK_TOKEN_TAG = "kohaku/lake-lock"
# How often a waiting writer repeats where it stands (a long eval can hold the lake for hours).
WAIT_REMINDER_SECONDS = 60.0


class LakeBusy(KohakuError):
    """Another process writes the lake and the caller chose not to wait (`--no-wait`)."""


@dataclass(frozen=True)
class LockHolder:
    pid: int
    host: str
    since: str  # ISO time, UTC
    what: str  # the command or run holding it
    token: str

    def describe(self) -> str:
        where = "" if self.host == socket.gethostname() else f" on {self.host}"
        return f"pid {self.pid}{where} ({self.what}) since {self.since}"


@dataclass
class _Held:
    handle: IO[str]
    token: str
    depth: int


# lake root -> this process's hold on its lock
_HELD: dict[Path, _Held] = {}


def lock_path(lake_root: Path) -> Path:
    return Path(lake_root) / LOCK_FILE


def current_holder(lake_root: Path) -> LockHolder | None:
    """Who the lock file names (None: nobody, or unreadable). It may name a holder that died:
    `hold_lake` finds out by taking the lock."""
    try:
        data = json.loads(lock_path(lake_root).read_text(encoding="utf-8") or "null")
        return LockHolder(
            int(data["pid"]), str(data["host"]), str(data["since"]), str(data["what"]), str(data["token"])
        )
    except (OSError, ValueError, TypeError, KeyError):
        return None


def held_token(lake_root: Path) -> str | None:
    """This process's token for the lake's lock, if it holds it."""
    held = _HELD.get(Path(lake_root).resolve())
    return held.token if held else None


@contextmanager
def hold_lake(
    lake_root: Path,
    what: str,
    *,
    wait: bool = True,
    say: Callable[[str], None] = lambda _m: None,
    join_token: str | None = None,
) -> Iterator[str]:
    """Hold the lake's writer lock for the block; yields the holder's token.

    `wait=False` raises `LakeBusy` at once when another process holds it. `join_token`: a
    token handed down by the holder (a run tag); when the lock file names that token, the
    block runs under the holder's lock without taking it.
    """
    root = Path(lake_root).resolve()
    held = _HELD.get(root)
    if held is not None:  # re-entrant within the process
        held.depth += 1
        try:
            yield held.token
        finally:
            held.depth -= 1
        return
    if join_token is not None:
        holder = current_holder(root)
        if holder is not None and holder.token == join_token and is_alive(holder):
            yield join_token
            return
    root.mkdir(parents=True, exist_ok=True)
    handle = lock_path(root).open("a+", encoding="utf-8")
    try:
        _acquire(handle, root, wait, say)
        token = uuid.uuid4().hex
        _write_holder(handle, LockHolder(os.getpid(), socket.gethostname(), _now(), what, token))
        _HELD[root] = _Held(handle, token, 1)
        try:
            yield token
        finally:
            del _HELD[root]
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        handle.close()


def _acquire(handle: IO[str], root: Path, wait: bool, say: Callable[[str], None]) -> None:
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = current_holder(root)
        who = holder.describe() if holder else "another process"
        if not wait:
            raise LakeBusy(
                f"the lake {root} is being written by {who}; wait for it to finish, or run again without --no-wait"
            ) from None
        say(f"waiting for the lake lock held by {who}")
        last = time.monotonic()
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                time.sleep(0.2)
                if time.monotonic() - last >= WAIT_REMINDER_SECONDS:
                    say(f"still waiting for the lake lock held by {who}")
                    last = time.monotonic()
        say("got the lake lock")
        return
    # Free at once. A holder still named in the file ended without releasing it (killed).
    stale = current_holder(root)
    if stale is not None:
        say(f"took over the lake lock left by {stale.describe()}: that process ended without releasing it")


def _write_holder(handle: IO[str], holder: LockHolder) -> None:
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps(holder.__dict__))
    handle.flush()


def is_alive(holder: LockHolder) -> bool:
    """Whether the holder's process still runs (a holder on another machine is trusted)."""
    if holder.host != socket.gethostname():
        return True  # another machine's process: trust its lock file
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
