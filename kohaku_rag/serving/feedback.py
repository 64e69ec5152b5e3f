"""What the people who use the server say about its answers, and the evaluation set made of it.

Each "right" / "wrong" on an answer card (POST /api/feedback) is one row of the store's
`feedback` table (served_store.py; no client address), appended, never rewritten. The
`feedback` question set, `<lake>/qa/question_sets/feedback.csv`, is a WattBot question file
built from it: one row per question asked (the latest word on it wins), the confirmed or
corrected answer as gold, and a `reviewed` column. A row counts in an evaluation only once a
reviewer set `reviewed` to yes (`load_questions` skips the others). A reviewer's decisions
(the row marked yes, its gold as the reviewer left it, a row added by hand) are taken from
the file into the store's `reviews` table, keyed by the answer id, each time the file is
rebuilt: new feedback never changes a reviewed row, and the file can always be rebuilt
from the store.

The server does not rebuild the file in the request that posts a verdict: a rebuild reads
every verdict, so at 10,000 of them each post would wait seconds. The post commits its row
to the store (what "kept" means) and asks the process's `QuestionSetWriter` for a rebuild,
which runs in the background; posts that arrive while one runs share the next. The file
follows the store within a few rebuilds' time, and a stopping server finishes it first."""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kohaku_rag.answering.config_folder import question_set_path
from kohaku_rag.answers.question_files import REVIEW_COLUMN, WATTBOT_COLUMNS, is_true_flag
from kohaku_rag.lake.csv_cells import csv_text, read_rows
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import write_bytes_atomic
from kohaku_rag.serving.served_store import STORE_DIR, connection, decode, has_store, insert_feedback, transaction

log = logging.getLogger(__name__)

FEEDBACK = "served_feedback"
FEEDBACK_SET = "feedback"
VERDICTS = ("right", "wrong")
EXTRA_COLUMNS = (REVIEW_COLUMN, "verdict", "served_value", "config", "answer_id", "feedback_time")
COLUMNS = (*WATTBOT_COLUMNS, *EXTRA_COLUMNS)
HAND_ROW = "row:"  # the reviews key of a row added by hand (it has no answer id)


def feedback_set_path(lake: Lake) -> Path:
    return question_set_path(lake, FEEDBACK_SET)


def read_feedback(lake: Lake) -> list[dict[str, Any]]:
    if not has_store(lake):
        return []
    with connection(lake) as db:
        return [decode(r) for r in db.execute("SELECT * FROM feedback ORDER BY seq").fetchall()]


def feedback_version(lake: Lake) -> str:
    """Changes with each verdict and each review taken in ("" when there is none)."""
    if not has_store(lake):
        return ""
    with connection(lake) as db:
        fb = db.execute("SELECT COUNT(*), MAX(seq) FROM feedback").fetchone()
        rv = db.execute("SELECT COUNT(*), MAX(time) FROM reviews").fetchone()
    return f"{fb[0]}:{fb[1]}:{rv[0]}:{rv[1]}" if fb[0] else ""


def feedback_count(lake: Lake, answer_id: str) -> int:
    with connection(lake) as db:
        return int(db.execute("SELECT COUNT(*) FROM feedback WHERE answer_id = ?", (answer_id,)).fetchone()[0])


def keep_feedback(lake: Lake, row: dict[str, Any], limit: int | None = None) -> bool:
    """Keep one verdict (committed on return). With a `limit`, an answer that already has
    that many verdicts keeps none more: False."""
    with connection(lake) as db, transaction(db):
        held = db.execute("SELECT COUNT(*) FROM feedback WHERE answer_id = ?", (row["answer_id"],)).fetchone()[0]
        if limit is not None and held >= limit:
            return False
        insert_feedback(db, row)
    return True


def append_feedback(lake: Lake, row: dict[str, Any], limit: int | None = None) -> Path | None:
    """Keep one verdict, then rebuild the question set (None when the `limit` refused it)."""
    if not keep_feedback(lake, row, limit):
        return None
    return write_question_set(lake)


def question_id(question: str) -> str:
    """A stable id per question, so the same question asked again updates its row."""
    return "fb-" + hashlib.sha256(" ".join(question.lower().split()).encode()).hexdigest()[:10]


def gold_row(feedback: dict[str, Any]) -> dict[str, str]:
    """The question file's row for one verdict: a right answer is its own gold; a wrong
    one's gold is the correction given (an empty value for the reviewer to fill in)."""
    right = feedback["verdict"] == "right"
    value = feedback["served_value"] if right else (feedback.get("correct_value") or "")
    unit = (None if right else feedback.get("correct_unit")) or feedback["served_unit"] or "is_blank"
    if right:
        refs = list(feedback["served_refs"])
    else:
        refs = [feedback["correct_ref"]] if feedback.get("correct_ref") else []
    answer = feedback["served_answer"] if right else (f"{value} {unit}".strip() if value else "")
    return {
        "id": question_id(feedback["question"]),
        "question": feedback["question"],
        "answer": answer,
        "answer_value": value,
        "answer_unit": unit,
        "ref_id": repr(refs) if refs else "is_blank",
        "ref_url": "is_blank",
        "supporting_materials": "is_blank",
        "explanation": feedback.get("comment") or "",
        REVIEW_COLUMN: "no",
        "verdict": feedback["verdict"],
        "served_value": feedback["served_value"],
        "config": feedback["config"],
        "answer_id": feedback["answer_id"],
        "feedback_time": feedback["time"].isoformat(timespec="seconds"),
    }


@contextmanager
def _rebuilding(lake: Lake) -> Iterator[None]:
    """One rebuild of the file at a time across processes: each reads the store after the
    previous one wrote, so the last file written holds every verdict committed before it."""
    lock = lake.root / STORE_DIR / "feedback_set.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _file_rows(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with path.open(encoding="utf-8-sig", newline="") as handle:
        return [{k: v or "" for k, v in row.items() if isinstance(k, str) and isinstance(v, str | None)}
                for row in read_rows(handle)]  # fmt: skip


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def take_reviews(lake: Lake, rows: list[dict[str, str]]) -> None:
    """The reviewer's decisions in the file, into the store: a row marked reviewed (its
    gold as edited), a row added by hand; a row set back to not reviewed drops its review."""
    now = datetime.now(UTC).isoformat(timespec="milliseconds")
    with connection(lake) as db:
        held = {r[0]: json.loads(r[1]) for r in db.execute("SELECT answer_id, row FROM reviews").fetchall()}
        changes: list[tuple[str, str, dict[str, str] | None]] = []
        for row in rows:
            qid = row.get("id") or ""
            key = row.get("answer_id") or (HAND_ROW + qid)
            keep = is_true_flag(row.get(REVIEW_COLUMN, "")) or key.startswith(HAND_ROW)
            if qid and keep and held.get(key) != row:
                changes.append((key, qid, row))
            elif qid and not keep and key in held:
                changes.append((key, qid, None))
        if not changes:  # the usual case: nothing new from the reviewer, no write
            return
        with transaction(db):
            for key, qid, change in changes:
                if change is None:
                    db.execute("DELETE FROM reviews WHERE answer_id = ?", (key,))
                else:
                    values = (key, qid, json.dumps(change), now)
                    db.execute("INSERT OR REPLACE INTO reviews VALUES (?, ?, ?, ?)", values)


def question_rows(lake: Lake) -> list[dict[str, str]]:
    """The question set's rows: the latest verdict on each question, unless a review of
    that question exists (the latest review wins); rows added by hand kept."""
    rows: dict[str, dict[str, str]] = {}
    for feedback in read_feedback(lake):
        row = gold_row(feedback)
        rows[row["id"]] = row
    with connection(lake) as db:
        for review in db.execute("SELECT row FROM reviews ORDER BY time, answer_id").fetchall():
            row = json.loads(review[0])
            rows[row["id"]] = row
    return list(rows.values())


def write_question_set(lake: Lake) -> Path:
    """(Re)build `qa/question_sets/feedback.csv` from the store, after taking the reviewer's
    decisions from it. A reviewer saving the file while it is rebuilt is not overwritten:
    the rebuild starts again from their file."""
    path = feedback_set_path(lake)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _rebuilding(lake):
        for _attempt in range(5):
            before = _stamp(path)
            take_reviews(lake, _file_rows(path))
            text = csv_text(COLUMNS, question_rows(lake))
            if _stamp(path) == before:  # else the reviewer saved meanwhile: their file is read again
                write_bytes_atomic(path, text.encode("utf-8"))
                break
    return path


class QuestionSetWriter:
    """A process's rebuilds of the question set, in a background thread and coalesced:
    `request` returns at once; a rebuild then runs, and every request made while it runs, or
    while the thread rests after it, is served by one more rebuild (which reads the store
    after their verdicts were committed). After a rebuild of d seconds the thread rests
    `REST` × d: a rebuild is Python work that holds the interpreter, and posts arriving
    back to back must not find one always running. The thread ends when nothing is wanted
    and starts again on the next request."""

    REST = 3.0

    def __init__(self, lake: Lake) -> None:
        self.lake = lake
        self._changed = threading.Condition()
        self._hurry = threading.Event()  # set by `flush`: no rest before the next rebuild
        self._wanted = 0  # requests made
        self._done = 0  # requests a finished rebuild covers
        self._worker: threading.Thread | None = None

    def request(self) -> None:
        with self._changed:
            self._wanted += 1
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="feedback-question-set", daemon=True)
                self._worker.start()

    def flush(self, timeout: float = 60.0) -> bool:
        """Wait until every request made so far is in the file (False: not within `timeout`)."""
        self._hurry.set()
        try:
            with self._changed:
                target = self._wanted
                return self._changed.wait_for(lambda: self._done >= target, timeout)
        finally:
            self._hurry.clear()

    def _work(self) -> None:
        while True:
            with self._changed:
                if self._done >= self._wanted:
                    self._worker = None
                    return
                target = self._wanted
            started = time.monotonic()
            try:
                write_question_set(self.lake)
            except Exception as exc:  # the verdicts are in the store; the next rebuild writes them
                log.error("the feedback question set was not rebuilt: %s: %s", type(exc).__name__, exc)
            with self._changed:
                self._done = target
                self._changed.notify_all()
            self._hurry.wait(self.REST * (time.monotonic() - started))
