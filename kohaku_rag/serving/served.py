"""The `served_answers` table: every question answered through the server, one Parquet
file per UTC day under `<lake>/served_answers/<YYYY-MM-DD>.parquet`, so a team sees what
people ask and can turn real questions into an evaluation set. No client address is kept."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kohaku_rag.lake import Lake, write_parquet_atomic

SERVED = "served_answers"

SERVED_SCHEMA = pa.schema(
    [
        pa.field("time", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("question", pa.string(), nullable=False),
        pa.field("unit", pa.string(), nullable=False),
        pa.field("config", pa.string(), nullable=False),
        pa.field("config_hash", pa.string(), nullable=False),  # what answered (the config as it ran)
        pa.field("index_version", pa.string(), nullable=False),  # which assembled index it searched
        pa.field("answer", pa.string(), nullable=False),
        pa.field("value", pa.string(), nullable=False),
        pa.field("refs", pa.list_(pa.string()), nullable=False),
        pa.field("is_blank", pa.bool_(), nullable=False),
        pa.field("seconds", pa.float64(), nullable=False),
        pa.field("stored", pa.bool_(), nullable=False),  # answered from an earlier stored answer
        pa.field("via", pa.string(), nullable=False),  # "api" or "openai"
        pa.field("response", pa.string(), nullable=False),  # the answer's JSON as served
    ]
)

_lock = threading.Lock()


def day_of(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d")


def day_path(lake: Lake, day: str) -> Path:
    return lake.table(SERVED, day)


def append_served(lake: Lake, row: dict[str, Any]) -> Path:
    """Add one served answer to its day's file (rewritten atomically: the day's file is
    small, and a reader never sees half a row)."""
    when: datetime = row["time"]
    path = day_path(lake, day_of(when))
    new = pa.Table.from_pylist([row], schema=SERVED_SCHEMA)
    with _lock:
        table = pa.concat_tables([read_day(path), new]) if path.exists() else new
        write_parquet_atomic(table, path)
    return path


def read_day(path: Path) -> pa.Table:
    return pq.read_table(path, schema=SERVED_SCHEMA)


def stored_responses(
    lake: Lake,
) -> tuple[dict[tuple[str, str, str, str, str], dict[str, Any]], dict[str, dict[str, Any]]]:
    """(question, unit, config, config_hash, index_version) -> the response served, for every
    answer kept in the table (the latest wins); and answer id -> the response served."""
    out: dict[tuple[str, str, str, str, str], dict[str, Any]] = {}
    by_id: dict[str, dict[str, Any]] = {}
    for day in lake.partitions(SERVED):
        for r in read_day(day_path(lake, day)).to_pylist():
            key = (r["question"], r["unit"], r["config"], r["config_hash"], r["index_version"])
            response = json.loads(r["response"])
            out[key] = response
            if response.get("answer_id"):
                by_id[response["answer_id"]] = response
    return out, by_id
