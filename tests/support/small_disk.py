"""A real small file system (tmpfs) for the tests of a full disk: mounted under the test's
folder, unmounted lazily afterwards (a server may still hold a file open); the test is
skipped where mounting is not allowed."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["fill_disk", "small_disk_at"]


@contextmanager
def small_disk_at(parent: Path, megabytes: int) -> Iterator[Path]:
    folder = parent / "small_disk"
    folder.mkdir()
    size = f"size={megabytes}m"
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", size, "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()[:80]}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=False)


def fill_disk(folder: Path) -> Path:
    """A file written under `folder` until its file system is full; delete it to free the space."""
    filler = folder / "filler"
    with filler.open("wb") as f:
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    return filler
