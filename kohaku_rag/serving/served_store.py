"""What users wrote and what they were told, kept where nothing is lost: one SQLite file in
the lake, `<lake>/served/served.sqlite`, in WAL mode.

Every served answer, every verdict and every reviewer decision is one appended (or, for a
decision, upserted) row, committed before the client hears "kept". SQLite serialises the
writers of every process on the file, so N `kohaku serve` processes on one lake lose no
row and each sees what the others wrote (an answer id given by one is found by all). The
Parquet/CSV files of older lakes (`served_answers/*.parquet`, `served_feedback/data.parquet`)
are imported once, in the same transaction that marks the store migrated, then renamed
`*.parquet.migrated` (kept, no longer read).

Tables: `answers` (one row per answer delivered), `feedback` (one row per verdict),
`reviews` (a reviewer's decision on the `feedback` question set's row, keyed by the answer
id it was made on; new feedback never overwrites it) and `jobs` (each answer id's state and,
once done, its answer: what another process needs to resume an answer it did not start;
while it runs, the process answering it and that process's lease on it: leases.py)."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from kohaku_rag.errors import KohakuError
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.sqlite_wal import use_wal

STORE_DIR = "served"
STORE_NAME = "served.sqlite"
OLD_ANSWERS = "served_answers"
OLD_FEEDBACK = "served_feedback"

ANSWER_COLUMNS = ("answer_id", "time", "question", "unit", "config", "config_hash", "index_version", "answer",
                  "value", "refs", "is_blank", "seconds", "stored", "via", "response")  # fmt: skip
FEEDBACK_COLUMNS = ("time", "answer_id", "question", "config", "served_answer", "served_value", "served_unit",
                    "served_refs", "verdict", "correct_value", "correct_unit", "correct_ref", "comment")  # fmt: skip
_LISTS = ("refs", "served_refs")
_BOOLS = ("is_blank", "stored")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, day TEXT NOT NULL, answer_id TEXT NOT NULL, time TEXT NOT NULL,
    question TEXT NOT NULL, unit TEXT NOT NULL, config TEXT NOT NULL, config_hash TEXT NOT NULL,
    index_version TEXT NOT NULL, answer TEXT NOT NULL, value TEXT NOT NULL, refs TEXT NOT NULL,
    is_blank INTEGER NOT NULL, seconds REAL NOT NULL, stored INTEGER NOT NULL, via TEXT NOT NULL,
    response TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS answers_by_id ON answers (answer_id);
CREATE INDEX IF NOT EXISTS answers_by_key ON answers (question, unit, config, config_hash, index_version);
CREATE INDEX IF NOT EXISTS answers_by_day ON answers (day);
CREATE TABLE IF NOT EXISTS feedback (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, time TEXT NOT NULL, answer_id TEXT NOT NULL, question TEXT NOT NULL,
    config TEXT NOT NULL, served_answer TEXT NOT NULL, served_value TEXT NOT NULL, served_unit TEXT NOT NULL,
    served_refs TEXT NOT NULL, verdict TEXT NOT NULL, correct_value TEXT, correct_unit TEXT, correct_ref TEXT,
    comment TEXT);
CREATE INDEX IF NOT EXISTS feedback_by_answer ON feedback (answer_id);
CREATE TABLE IF NOT EXISTS reviews (
    answer_id TEXT PRIMARY KEY, question_id TEXT NOT NULL, row TEXT NOT NULL, time TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    answer_id TEXT PRIMARY KEY, time TEXT NOT NULL, state TEXT NOT NULL, question TEXT NOT NULL,
    config TEXT NOT NULL, key TEXT, response TEXT);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
# Columns the jobs table gained after stores were first written: what a job was asked with
# (JSON: unit, history, via), the process answering it, when its lease runs out (epoch
# seconds) and how many times it was started. Old rows have them NULL (1 start).
_JOB_COLUMNS = (("spec", "TEXT"), ("owner", "TEXT"), ("lease_until", "REAL"), ("runs", "INTEGER NOT NULL DEFAULT 1"))

_ready: set[Path] = set()
_ready_lock = threading.Lock()


def store_path(lake: Lake) -> Path:
    return lake.root / STORE_DIR / STORE_NAME


def has_store(lake: Lake) -> bool:
    """Whether there is anything to read (a reader never creates the store in a lake
    that has none)."""
    old = (lake.root / OLD_ANSWERS, lake.root / OLD_FEEDBACK)
    return store_path(lake).exists() or any(folder.is_dir() and any(folder.glob("*.parquet")) for folder in old)


def _connect(path: Path) -> sqlite3.Connection:
    # autocommit mode: each statement commits, `transaction` opens an explicit one
    db = sqlite3.connect(path, timeout=60, isolation_level=None, check_same_thread=False)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA busy_timeout = 60000")
    db.execute("PRAGMA synchronous = NORMAL")  # WAL: a commit survives a process crash
    return db


class ServedStoreDamaged(KohakuError):
    """The served store can't be read as a database: what the server answers instead."""


# What SQLite says of a file that is not (or no longer) a whole database.
_DAMAGED = ("file is not a database", "database disk image is malformed")


@contextmanager
def connection(lake: Lake) -> Iterator[sqlite3.Connection]:
    """A connection to the lake's store, created and migrated on first use. A store that
    can't be read as a database raises `ServedStoreDamaged`, naming the fix."""
    path = store_path(lake)
    try:
        if path not in _ready:
            _prepare(lake, path)
        db = _connect(path)
        try:
            yield db
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        if not any(phrase in str(exc).lower() for phrase in _DAMAGED):
            raise
        raise ServedStoreDamaged(
            f"{STORE_DIR}/{STORE_NAME} is damaged ({exc}): answers can't be kept until it is repaired; "
            "`kohaku doctor` on the lake says how"
        ) from exc


@contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE: the write lock is taken at once, so two processes never both read
    then write on stale reads."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _prepare(lake: Lake, path: Path) -> None:
    with _ready_lock:
        if path in _ready:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        db = _connect(path)
        try:
            use_wal(db.execute, 60)
            db.executescript(_SCHEMA)
            with transaction(db):
                _add_job_columns(db)
                done = db.execute("SELECT value FROM meta WHERE key = 'migrated'").fetchone()
                moved = [] if done else _import_old(lake, db)
                db.execute("INSERT OR REPLACE INTO meta VALUES ('migrated', ?)", (_iso(datetime.now(UTC)),))
        finally:
            db.close()
        for old in moved:  # committed: the old files are set aside, kept
            if old.exists():
                os.replace(old, old.with_name(old.name + ".migrated"))
        _ready.add(path)


def _add_job_columns(db: sqlite3.Connection) -> None:
    """The jobs table's later columns, added to a store made before them (in the migrating
    transaction: two processes starting at once add each column once)."""
    held = {row[1] for row in db.execute("PRAGMA table_info(jobs)").fetchall()}
    for name, kind in _JOB_COLUMNS:
        if name not in held:
            db.execute(f"ALTER TABLE jobs ADD COLUMN {name} {kind}")
    db.execute("CREATE INDEX IF NOT EXISTS jobs_running ON jobs (lease_until) WHERE state = 'running'")


def _import_old(lake: Lake, db: sqlite3.Connection) -> list[Path]:
    """The Parquet tables of a lake written before the store, imported row by row."""
    moved = []
    for day in sorted((lake.root / OLD_ANSWERS).glob("*.parquet")):
        for row in pq.read_table(day).to_pylist():
            response = json.loads(row["response"])
            insert_answer(db, {**row, "answer_id": response.get("answer_id") or ""})
        moved.append(day)
    old_feedback = lake.root / OLD_FEEDBACK / "data.parquet"
    if old_feedback.exists():
        for row in pq.read_table(old_feedback).to_pylist():
            insert_feedback(db, row)
        moved.append(old_feedback)
    return moved


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).isoformat(timespec="milliseconds")


def _encode(row: dict[str, Any], columns: tuple[str, ...]) -> list[Any]:
    out = []
    for c in columns:
        v = row.get(c)
        if c == "time":
            v = _iso(v) if isinstance(v, datetime) else str(v)
        elif c in _LISTS:
            v = json.dumps(list(v or []))
        elif c in _BOOLS:
            v = int(bool(v))
        out.append(v)
    return out


def decode(row: sqlite3.Row) -> dict[str, Any]:
    """A stored row as the rest of the project reads it: times as datetimes, lists, bools."""
    out = dict(row)
    out.pop("seq", None)
    out.pop("day", None)
    if "time" in out:
        out["time"] = datetime.fromisoformat(out["time"])
    for c in _LISTS:
        if c in out:
            out[c] = json.loads(out[c])
    for c in _BOOLS:
        if c in out:
            out[c] = bool(out[c])
    return out


def insert_answer(db: sqlite3.Connection, row: dict[str, Any]) -> None:
    when: datetime = row["time"]
    db.execute(
        f"INSERT INTO answers (day, {', '.join(ANSWER_COLUMNS)}) VALUES (?{', ?' * len(ANSWER_COLUMNS)})",
        [when.astimezone(UTC).strftime("%Y-%m-%d"), *_encode(row, ANSWER_COLUMNS)],
    )


def insert_feedback(db: sqlite3.Connection, row: dict[str, Any]) -> None:
    db.execute(
        f"INSERT INTO feedback ({', '.join(FEEDBACK_COLUMNS)}) VALUES ({', '.join('?' * len(FEEDBACK_COLUMNS))})",
        _encode(row, FEEDBACK_COLUMNS),
    )
