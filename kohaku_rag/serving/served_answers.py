"""The `served_answers` table: every question answered through the server, one row per
answer a client received, in the lake's served store (served_store.py: SQLite, appended by
every `kohaku serve` process on the lake at once), read by day for the Dagster partitions.
A team sees what people ask and can turn real questions into an evaluation set. No client
address is kept."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from kohaku_rag.lake.layout import Lake
from kohaku_rag.serving.served_store import connection, decode, has_store, insert_answer, transaction
from kohaku_rag.web_links import web_link

SERVED = "served_answers"
AnswerKey = tuple[str, str, str, str, str]  # question, unit, config, its hash, the index version


def day_of(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d")


def append_served(lake: Lake, row: dict[str, Any]) -> None:
    """Add one served answer (committed when this returns; other processes see it)."""
    response = json.loads(row["response"]) if isinstance(row.get("response"), str) else {}
    with connection(lake) as db, transaction(db):
        insert_answer(db, {**row, "answer_id": row.get("answer_id") or response.get("answer_id") or ""})


def day_versions(lake: Lake) -> dict[str, str]:
    """Each day with answers -> its version (its row count and last row: rows are only added)."""
    if not has_store(lake):
        return {}
    with connection(lake) as db:
        rows = db.execute("SELECT day, COUNT(*), MAX(seq) FROM answers GROUP BY day ORDER BY day").fetchall()
    return {r[0]: f"{r[1]}:{r[2]}" for r in rows}


def day_rows(lake: Lake, day: str) -> list[dict[str, Any]]:
    """One day's served answers, in the order they were served."""
    if not has_store(lake):
        return []
    with connection(lake) as db:
        rows = db.execute("SELECT * FROM answers WHERE day = ? ORDER BY seq", (day,)).fetchall()
    return [decode(r) for r in rows]


def all_rows(lake: Lake) -> list[dict[str, Any]]:
    if not has_store(lake):
        return []
    with connection(lake) as db:
        return [decode(r) for r in db.execute("SELECT * FROM answers ORDER BY seq").fetchall()]


RECENT_ANSWERS = 20


def typical_seconds(lake: Lake, config: str) -> tuple[float, int] | None:
    """(median seconds, answers) of the config's last answers on this lake that the model
    wrote (not served from the store): what the ask page tells an asker to expect before the
    first token. None before the first one."""
    if not has_store(lake):
        return None
    with connection(lake) as db:
        rows = db.execute(
            "SELECT seconds FROM answers WHERE config = ? AND stored = 0 ORDER BY seq DESC LIMIT ?",
            (config, RECENT_ANSWERS),
        ).fetchall()
    seconds = sorted(float(r[0]) for r in rows)
    if not seconds:
        return None
    return seconds[len(seconds) // 2], len(seconds)


def response_by_key(lake: Lake, key: AnswerKey) -> dict[str, Any] | None:
    """The latest response served for (question, unit, config, config hash, index version)."""
    if not has_store(lake):
        return None
    with connection(lake) as db:
        row = db.execute(
            "SELECT response FROM answers WHERE question = ? AND unit = ? AND config = ? AND config_hash = ? "
            "AND index_version = ? ORDER BY seq DESC LIMIT 1",
            key,
        ).fetchone()
    return _kept_response(row[0]) if row else None


def response_by_id(lake: Lake, answer_id: str) -> dict[str, Any] | None:
    """The response served under an answer id (by any process on the lake)."""
    if not has_store(lake):
        return None
    with connection(lake) as db:
        row = db.execute(
            "SELECT response FROM answers WHERE answer_id = ? ORDER BY seq DESC LIMIT 1", (answer_id,)
        ).fetchone()
    return _kept_response(row[0]) if row else None


def _kept_response(text: str) -> dict[str, Any]:
    """A stored response as it may be served again: an answer kept before citation URLs
    were checked may cite a `javascript:` link, which leaves as ""."""
    response: dict[str, Any] = json.loads(text)
    cited = response.get("cited")
    if isinstance(cited, list):
        response["cited"] = [{**c, "url": web_link(c.get("url"))} if isinstance(c, dict) else c for c in cited]
    return response
