"""A full disk is one line: which folder, how much is free, how much to free.

Writes fail deep inside SQLite, SQLAlchemy (Dagster's run storage), Arrow or numpy, each
wrapping ENOSPC its own way; `is_disk_full` recognises them all along the exception's
chain, and the command says it in one line instead of a traceback."""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

# What the libraries the lake writes through say when the disk is full.
_FULL = ("no space left on device", "database or disk is full", "disk is full", "sqlite_full")
HEADROOM = 16 * 2**20  # what a run writes beside the index at least (run records, logs, tables)
FULL_BELOW = 2 * 2**20  # free space under which a disk counts as full


# sqlite-vec says this instead of SQLite's own "disk is full" when it can't add a chunk of
# vectors; a failed write cleans up after itself (the store being built is deleted), so the
# disk need not look full afterwards: it counts as full where a new index would not fit.
_NO_CHUNK = "could not insert a new vector chunk"


def is_disk_full(exc: BaseException, lake: Path | None = None) -> bool:
    """Whether `exc` (or an exception in its chain) says the disk is full; given the `lake`,
    sqlite-vec's failure to add a chunk counts when a new index would not fit there."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(current).lower()
        if any(phrase in text for phrase in _FULL):
            return True
        if lake is not None and _NO_CHUNK in text and lacks_room(lake):
            return True
        current = current.__cause__ or current.__context__
    return False


def lacks_room(lake: Path) -> bool:
    """Less free where the lake lives than a new index generation beside the live one needs
    (the index folder's size again, plus headroom)."""
    try:
        return shutil.disk_usage(_existing(lake)).free < _size(lake / "index") + HEADROOM
    except OSError:
        return False


def _existing(folder: Path) -> Path:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def nearly_full(folder: Path) -> bool:
    """Almost nothing free where the lake lives: a write that just failed there (whatever
    its library called it) failed for want of space."""
    try:
        return shutil.disk_usage(_existing(folder)).free < FULL_BELOW
    except OSError:
        return False


def _size(folder: Path) -> int:
    try:
        return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    except OSError:
        return 0


def _mb(n: int) -> str:
    return f"{n / 2**20:,.0f} MB" if n >= 2**20 else f"{n / 2**10:,.0f} kB"


def disk_full_message(folder: Path) -> str:
    """One line: the folder, what is free there, and what to free (the index folder's size
    again, for the new generation written beside the live one, plus headroom)."""
    free = shutil.disk_usage(_existing(folder)).free
    need = _size(folder / "index") + HEADROOM
    return (
        f"the disk holding {folder} is full ({_mb(free)} free): free at least {_mb(need)} there "
        "and run the command again (nothing written so far is lost)"
    )
