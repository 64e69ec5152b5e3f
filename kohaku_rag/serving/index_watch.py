"""The served index's bytes checked against their checksums: when the server starts, then
every `every` seconds in a background thread.

Search checks what costs nothing when it opens a generation (sizes, row counts; a checksum
only when a file's size or mtime moved). Bytes rewritten in place with the mtime put back,
or another generation's file copied over the live one, pass those checks; reading every
file against the checksum it was published with finds them. What is found holds for the
generation it was found in: a newly published one is served until the next check."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from kohaku_rag.indexing.index_health import changed_files
from kohaku_rag.lake.layout import Lake

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verified:
    stamp: tuple[object, ...] | None  # the index files' stamp when checked (Lake.index_stamp)
    problem: str | None


class IndexWatch:
    def __init__(self, lake: Lake, every: float) -> None:
        self.lake = lake
        self.every = every
        self._last = Verified(None, None)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def verify(self) -> str | None:
        """Read every file of the live generation against its checksum now."""
        stamp = self.lake.index_stamp()
        try:
            found = changed_files(self.lake)
        except OSError as exc:  # the next check tries again; search meets what it meets
            log.warning("checking the index's checksums failed: %s", exc)
            found = []
        problem = None
        if found:
            name, why = found[0]
            problem = f"index/{name} {why}; `kohaku index` rebuilds it from the stored rows"
            log.error("the served index can't be trusted: %s", problem)
        self._last = Verified(stamp, problem)
        return problem

    def problem(self) -> str | None:
        """What the last check found in the generation still served (None: nothing)."""
        last = self._last
        return last.problem if last.problem is not None and last.stamp == self.lake.index_stamp() else None

    def start(self) -> None:
        """Check once now, then every `every` seconds until `stop` (a daemon thread)."""
        self.verify()
        if self.every > 0 and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="index-watch", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.verify()
