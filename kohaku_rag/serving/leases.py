"""Who is answering each job, in the served store's `jobs` table (served_store.py), so that
no answer is left running forever when its process dies.

A `kohaku serve` process that starts a job holds a lease on it: an expiry time it pushes
forward while it lives (`renew`, a few times per lease). A process killed with SIGKILL, or
whose machine stopped, renews nothing; once its lease has run out, the first live process
on the lake to look (`claim_orphans`, run by each on a timer) takes the job over and
answers it again under the same answer id, or, when that cannot help, marks it failed with
the reason. A client waiting on any process hears which. A job is started at most
`MAX_RUNS` times: a question whose answering kills its process is not passed on forever.
Times are wall-clock epoch seconds, as every process on the lake reads the same clock."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kohaku_rag.answering.followup import Turn
from kohaku_rag.lake.layout import Lake
from kohaku_rag.serving.served_store import connection, transaction

MAX_RUNS = 2
TAKEN_OVER = "the server process answering this question stopped; another process took it over and answers it again"
OWNER_LOST = "owner_lost"


@dataclass(frozen=True)
class Owner:
    """One server process as the owner of the jobs it runs: its id names it in the store
    (host, pid and a random part, as a pid is reused), `lease` is how long its hold on a job
    lasts without renewal."""

    id: str
    lease: float

    @staticmethod
    def new(lease: float) -> Owner:
        return Owner(f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}", lease)


@dataclass(frozen=True)
class JobSpec:
    """What a job was asked with, beyond its question and config: enough to ask it again."""

    unit: str | None
    history: tuple[Turn, ...]
    via: str

    def to_json(self) -> str:
        return json.dumps({"unit": self.unit, "history": [[t.role, t.content] for t in self.history], "via": self.via})

    @staticmethod
    def from_json(text: str | None) -> JobSpec | None:
        """None for a job recorded before specs were kept (it cannot be asked again as it was)."""
        if not text:
            return None
        data = json.loads(text)
        return JobSpec(data["unit"], tuple(Turn(role, content) for role, content in data["history"]), data["via"])


@dataclass(frozen=True)
class Orphan:
    """A job its owner's lease no longer covers, now claimed by this process to answer again."""

    answer_id: str
    question: str
    config: str
    spec: JobSpec
    runs: int  # this start included


def lost_payload(runs: int, spec: JobSpec | None) -> dict[str, Any]:
    """The error a job whose owner died gets when it is not taken over, with why."""
    if spec is None:
        why = "it was started by an older server version, which did not keep what it needs to be asked again"
    else:
        why = f"it was started {runs} times and each server process answering it stopped; it is not tried again"
    message = f"the server process answering this question stopped before it finished ({why}); ask again"
    return {"error": {"message": message, "type": OWNER_LOST, "code": 503}}


def _iso_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def job_started(lake: Lake, owner: Owner, answer_id: str, question: str, config: str, spec: JobSpec) -> None:
    """A new job, running under the owner's lease."""
    with connection(lake) as db:
        db.execute(
            "INSERT OR REPLACE INTO jobs (answer_id, time, state, question, config, key, response, spec, owner, "
            "lease_until, runs) VALUES (?, ?, 'running', ?, ?, NULL, NULL, ?, ?, ?, 1)",
            (answer_id, _iso_now(), question, config, spec.to_json(), owner.id, time.time() + owner.lease),
        )


def job_finished(
    lake: Lake, owner: Owner, answer_id: str, state: str, key: list[str] | None, response: dict[str, Any]
) -> bool:
    """A job's end: "done" with its stored-answer key and answer, or "error" with the error.
    Recorded only while the job is still the owner's (False otherwise: another process took
    it over after this one's lease ran out, and records its own end)."""
    with connection(lake) as db:
        done = db.execute(
            "UPDATE jobs SET state = ?, key = ?, response = ?, lease_until = NULL WHERE answer_id = ? AND owner = ?",
            (state, json.dumps(key) if key is not None else None, json.dumps(response), answer_id, owner.id),
        )
        return done.rowcount > 0


def job_of(lake: Lake, answer_id: str) -> dict[str, Any] | None:
    """A job started by any process on the lake: state, question, config, key, response,
    runs (its starts: above 1 once it was taken over) and lease_until."""
    with connection(lake) as db:
        row = db.execute("SELECT * FROM jobs WHERE answer_id = ?", (answer_id,)).fetchone()
    if row is None:
        return None
    out = dict(row)
    out["key"] = json.loads(out["key"]) if out["key"] else None
    out["response"] = json.loads(out["response"]) if out["response"] else None
    return out


def renew(lake: Lake, owner: Owner) -> None:
    """Push the lease of every job the owner still runs forward."""
    with connection(lake) as db:
        db.execute(
            "UPDATE jobs SET lease_until = ? WHERE state = 'running' AND owner = ?",
            (time.time() + owner.lease, owner.id),
        )


_EXPIRED = "state = 'running' AND (lease_until IS NULL OR lease_until < ?)"


def claim_orphans(lake: Lake, owner: Owner) -> tuple[list[Orphan], list[tuple[str, dict[str, Any]]]]:
    """The jobs whose lease ran out, settled in one transaction: those that may run again are
    now the owner's (to answer), the others failed with their reason ((answer id, error)
    pairs). A job recorded before leases has no lease at all: its process is long gone."""
    now = time.time()
    with connection(lake) as db:
        if db.execute(f"SELECT 1 FROM jobs WHERE {_EXPIRED} LIMIT 1", (now,)).fetchone() is None:
            return [], []  # the usual tick: a read, no write
        with transaction(db):
            rows = db.execute(f"SELECT * FROM jobs WHERE {_EXPIRED}", (now,)).fetchall()
            return _settle(db, owner, rows, now)


def _settle(
    db: sqlite3.Connection, owner: Owner, rows: list[sqlite3.Row], now: float
) -> tuple[list[Orphan], list[tuple[str, dict[str, Any]]]]:
    claimed: list[Orphan] = []
    failed: list[tuple[str, dict[str, Any]]] = []
    for row in rows:
        spec = JobSpec.from_json(row["spec"])
        runs = int(row["runs"] or 1)
        if spec is not None and runs < MAX_RUNS:
            db.execute(
                "UPDATE jobs SET owner = ?, lease_until = ?, runs = ? WHERE answer_id = ?",
                (owner.id, now + owner.lease, runs + 1, row["answer_id"]),
            )
            claimed.append(Orphan(row["answer_id"], row["question"], row["config"], spec, runs + 1))
        else:
            payload = lost_payload(runs, spec)
            db.execute(
                "UPDATE jobs SET state = 'error', response = ?, lease_until = NULL WHERE answer_id = ?",
                (json.dumps(payload), row["answer_id"]),
            )
            failed.append((row["answer_id"], payload))
    return claimed, failed
