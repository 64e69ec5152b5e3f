"""What a deep check found that the cheap checks miss, recorded beside the file.

An ordinary run checks a file by its size and mtime (and a table by its footer): bytes
rewritten in place with the mtime put back, or rows garbled behind a valid footer, pass.
`kohaku doctor` reads everything (and `kohaku index` every checksum of the live index
generation); what it finds is written to `.<name>.damaged` beside the file (its size, mtime
and the problem), and every cheap check consults it, so the next plain `kohaku index`
rebuilds what doctor reported. The record holds only while the file
is unchanged: a rebuilt file is a new one."""

from __future__ import annotations

import json
import os
from pathlib import Path

__all__ = ["damage_marker", "mark_damaged", "recorded_damage"]


def damage_marker(path: Path) -> Path:
    return path.with_name(f".{path.name}.damaged")


def mark_damaged(path: Path, problem: str, found_by: str = "kohaku doctor") -> None:
    """Record what a deep check (`found_by`) found in a file the cheap checks pass (same
    size, same mtime), so the next ordinary run treats it as damaged: valid while the file
    is unchanged."""
    stat = path.stat()
    record = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "problem": problem, "found_by": found_by}
    marker = damage_marker(path)
    tmp = marker.with_name(marker.name + ".tmp")
    tmp.write_bytes(json.dumps(record).encode())
    os.replace(tmp, marker)


def recorded_damage(path: Path) -> str | None:
    """The problem a deep check recorded for the file as it is now (None: none recorded,
    or the file changed since)."""
    try:
        record = json.loads(damage_marker(path).read_bytes())
        stat = path.stat()
    except (OSError, ValueError):
        return None
    if record.get("size") != stat.st_size or record.get("mtime_ns") != stat.st_mtime_ns:
        return None
    return f"{record.get('problem')} (found by `{record.get('found_by', 'kohaku doctor')}`)"
