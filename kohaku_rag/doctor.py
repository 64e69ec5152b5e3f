"""`kohaku doctor`: check a whole lake, say what is wrong and how it is fixed.

Everything in a lake is derived from the corpus, except what a person decided (configs,
the index settings): the per-document tables are the record, the indexes and answering
tables are built from them. So every finding here has a fix that loses nothing: a table
that can't be read is set aside and recomputed, an index that differs from the rows is
re-assembled from them, a leftover of a killed write is deleted. `repair_lake` applies the
fixes that need no corpus; re-indexing (`kohaku index`, which `kohaku doctor --repair` runs
afterwards) does the rest.

One check, one repair: what `doctor` finds that the cheap checks of an ordinary run miss
(a file's bytes changed with its size and mtime put back, a table's rows garbled behind a
valid footer) is recorded beside the file (`lake.mark_damaged`), so the next plain
`kohaku index` treats it as damaged and rebuilds it.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from kohaku_rag.indexing import index_health
from kohaku_rag.indexing import steps as ix
from kohaku_rag.indexing.failures import recorded_failure
from kohaku_rag.indexing.index_health import verify_index
from kohaku_rag.indexing.index_plan import INTERMEDIATE
from kohaku_rag.lake.damage import mark_damaged
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.lock import LOCK_FILE, current_holder, is_alive
from kohaku_rag.lake.tables import content_problem, unreadable_reason
from kohaku_rag.serving.served_store import store_path

__all__ = ["Finding", "check_lake", "repair_lake"]

# The per-document tables a document's rebuild reads back (its index rows are what search uses).
_INTERMEDIATE = INTERMEDIATE
# Leftovers of writes that were killed: atomic writes' temporary files and a store built beside.
_LEFTOVER_SUFFIXES = (".tmp", ".building", ".building-wal", ".building-shm")


@dataclass(frozen=True)
class Finding:
    area: str  # "table", "index", "leftover", "failure", "served", "lock", "runs"
    subject: str  # the file, index or document it is about
    problem: str
    fix: str
    repairable: bool  # `repair_lake` (or the re-index after it) fixes it


def check_lake(lake: Lake, corpus: Path | None = None) -> list[Finding]:
    """Every finding in the lake: unreadable tables, leftovers, indexes that differ from the
    rows, remembered document failures, a lock left by a process that died."""
    if not lake.root.exists():
        return [Finding("lake", str(lake.root), "no such folder", "`kohaku index --corpus DIR` builds a lake", False)]
    return [
        *_unreadable_tables(lake),
        *_leftovers(lake),
        *_indexes(lake, corpus),
        *_failures(lake),
        *_served_store(lake),
        *_lock(lake),
    ]


def repair_lake(lake: Lake) -> list[str]:
    """Apply the fixes that need no corpus and no model; returns one line per action.
    Unreadable tables are renamed aside (`.unreadable`), so the next run recomputes them. A
    document's intermediate table (its tree, captions, vectors) is only read when the
    document is rebuilt, so its index rows are set aside too: the next `kohaku index`
    rebuilds that document (its readable steps are reused) instead of skipping it."""
    done: list[str] = []
    for finding in _unreadable_tables(lake):
        path = Path(finding.subject)
        done.append(f"moved {path} aside to {_set_aside(path)}: {finding.problem}")
        if path.parent.name in _INTERMEDIATE and path.parent.parent == lake.root:
            rows = lake.table(ix.INDEX_ROWS, path.stem)
            if rows.exists():
                done.append(f"moved {rows} aside to {_set_aside(rows)}: {path.stem} is rebuilt")
    for finding in _leftovers(lake):
        Path(finding.subject).unlink(missing_ok=True)
        done.append(f"deleted {finding.subject}: {finding.problem}")
    return done


def _set_aside(path: Path) -> str:
    aside = path.with_name(path.name + ".unreadable")
    os.replace(path, aside)
    return aside.name


# Served answers and verdicts of a lake from before the served store: records a person
# made, not derived, imported once by the store; never set aside as untrusted.
_NOT_DERIVED = (".dagster", "served_answers", "served_feedback")


def _parquet_files(lake: Lake) -> list[Path]:
    found = lake.root.rglob("*.parquet")
    return sorted(p for p in found if not set(_NOT_DERIVED) & set(p.relative_to(lake.root).parts))


def _unreadable_tables(lake: Lake) -> list[Finding]:
    """Tables that can't be read, or whose content differs from their checksum (recorded,
    so the next ordinary run recomputes them too)."""
    found = []
    for path in _parquet_files(lake):
        why = unreadable_reason(path)
        if why is None and (why := content_problem(path)) is not None:
            mark_damaged(path, why)
        if why is not None:
            found.append(Finding("table", str(path), f"can't be read ({why})", "set aside and recomputed", True))
    return found


def _leftovers(lake: Lake) -> list[Finding]:
    found = []
    for path in sorted(lake.root.rglob(".*")):
        if path.is_file() and path.name.endswith(_LEFTOVER_SUFFIXES) and ".dagster" not in path.parts:
            found.append(Finding("leftover", str(path), "left by a write that was killed", "deleted", True))
    return found


def _indexes(lake: Lake, corpus: Path | None) -> list[Finding]:
    """The published generation verified in full (every checksum, quick_check, the vectors
    against their digests), then each part compared with the per-document tables."""
    docs = lake.partitions(ix.INDEX_ROWS)
    if not docs:
        return []
    rebuild = "rebuilt from the stored rows by `kohaku index`"
    found = [Finding("index", subject, problem, rebuild, True) for subject, problem in verify_index(lake)]
    for finding in found:  # recorded: the next `kohaku index` rebuilds what only this deep check saw
        path = Path(finding.subject)
        if path.parent == lake.index_dir and path.is_file() and path.name != lake.manifest_path.name:
            mark_damaged(path, finding.problem)
    if not lake.manifest_path.exists():
        found.append(Finding("index", str(lake.manifest_path), "no published index generation", rebuild, True))
        return found
    lag = index_health.indexes_behind(lake, docs, corpus)
    named = ((str(lake.vectors_path), lag.vectors), (str(lake.bm25_path), lag.bm25), ("search aids", lag.aids))
    for subject, behind in named:
        if not behind or any(f.subject == subject for f in found):
            continue
        if len(behind) == 1 and behind[0].startswith("("):
            found.append(Finding("index", subject, behind[0][1:-1], rebuild, True))
        else:
            found.append(_behind(subject, behind))
    return found


def _behind(subject: str, docs: list[str]) -> Finding:
    return Finding("index", subject, f"differs from the stored rows for {_few(docs)}", "re-assembled", True)


def _failures(lake: Lake) -> list[Finding]:
    folder = lake.root / "failures"
    found = []
    for path in sorted(folder.glob("*.json")) if folder.exists() else []:
        failure = recorded_failure(lake, path.stem)
        if failure is not None:
            found.append(
                Finding(
                    "failure",
                    failure.doc_id,
                    f"failed on {failure.at[:19]}: {failure.reason}",
                    "fix the file (it is retried when it changes) or `kohaku index --retry-failed`",
                    False,
                )
            )
    return found


def _served_store(lake: Lake) -> list[Finding]:
    """SQLite's integrity check of the served store. It holds what users were told and wrote,
    derived from nothing, so it is never rebuilt: the fix recovers its rows into a new file."""
    path = store_path(lake)
    if not path.is_file():
        return []
    try:
        db = sqlite3.connect(path, timeout=60)
        try:
            rows = [str(r[0]) for r in db.execute("PRAGMA integrity_check").fetchall()]
        finally:
            db.close()
        problem = None if rows == ["ok"] else "; ".join(rows[:3])
    except sqlite3.DatabaseError as exc:
        problem = str(exc)
    if problem is None:
        return []
    name = path.name
    fix = (
        f"stop `kohaku serve`, move it aside (`mv {name} {name}.damaged` in {path.parent.name}/: serve starts a "
        f"new one), then recover what can be read into it: `sqlite3 {name}.damaged .recover | sqlite3 {name}`"
    )
    return [Finding("served", str(path), f"fails SQLite's integrity check ({problem})", fix, False)]


def _lock(lake: Lake) -> list[Finding]:
    holder = current_holder(lake.root)
    if holder is None or is_alive(holder):
        return []  # free, or a writer at work
    return [
        Finding(
            "lock",
            str(lake.root / LOCK_FILE),
            f"left by {holder.describe()}, which ended without releasing it",
            "none needed: the next writer takes it over",
            False,
        )
    ]


def _few(items: list[str], n: int = 5) -> str:
    return ", ".join(items[:n]) + (f" and {len(items) - n} more" if len(items) > n else "")
