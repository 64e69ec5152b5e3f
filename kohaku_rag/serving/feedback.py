"""What the people who use the server say about its answers, and the evaluation set made of it.

Each "right" / "wrong" on an answer card (POST /api/feedback) is one row of the
`served_feedback` table (`<lake>/served_feedback/data.parquet`, no client address). The
`feedback` question set, `<lake>/qa/question_sets/feedback.csv`, is a WattBot question file
built from it: one row per question asked (the latest word on it wins), the confirmed or
corrected answer as gold, and a `reviewed` column. A row counts in an evaluation only once a
reviewer set `reviewed` to yes (`load_questions` skips the others), and a reviewed row is the
team's: rebuilding the file never changes it; the reviewer may edit its gold, too."""

from __future__ import annotations

import csv
import hashlib
import io
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kohaku_rag.answering.config_folder import question_set_path
from kohaku_rag.evaluation.wattbot_csv import REVIEW_COLUMN, WATTBOT_COLUMNS, is_true_flag
from kohaku_rag.lake import Lake, write_bytes_atomic, write_parquet_atomic

FEEDBACK = "served_feedback"
FEEDBACK_SET = "feedback"
VERDICTS = ("right", "wrong")
EXTRA_COLUMNS = (REVIEW_COLUMN, "verdict", "served_value", "config", "answer_id", "feedback_time")

FEEDBACK_SCHEMA = pa.schema(
    [
        pa.field("time", pa.timestamp("ms", tz="UTC"), nullable=False),
        pa.field("answer_id", pa.string(), nullable=False),
        pa.field("question", pa.string(), nullable=False),  # the question answered (a follow-up's standalone one)
        pa.field("config", pa.string(), nullable=False),
        pa.field("served_answer", pa.string(), nullable=False),
        pa.field("served_value", pa.string(), nullable=False),
        pa.field("served_unit", pa.string(), nullable=False),
        pa.field("served_refs", pa.list_(pa.string()), nullable=False),
        pa.field("verdict", pa.string(), nullable=False),  # "right" or "wrong"
        pa.field("correct_value", pa.string()),
        pa.field("correct_unit", pa.string()),
        pa.field("correct_ref", pa.string()),
        pa.field("comment", pa.string()),
    ]
)

_lock = threading.Lock()


def feedback_path(lake: Lake) -> Path:
    return lake.table(FEEDBACK)


def feedback_set_path(lake: Lake) -> Path:
    return question_set_path(lake, FEEDBACK_SET)


def read_feedback(lake: Lake) -> list[dict[str, Any]]:
    path = feedback_path(lake)
    return pq.read_table(path, schema=FEEDBACK_SCHEMA).to_pylist() if path.exists() else []


def append_feedback(lake: Lake, row: dict[str, Any]) -> Path:
    """Keep one verdict, then rebuild the question set from all of them."""
    path = feedback_path(lake)
    new = pa.Table.from_pylist([row], schema=FEEDBACK_SCHEMA)
    with _lock:
        table = pa.concat_tables([pq.read_table(path, schema=FEEDBACK_SCHEMA), new]) if path.exists() else new
        write_parquet_atomic(table, path)
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


def write_question_set(lake: Lake) -> Path:
    """(Re)build `qa/question_sets/feedback.csv`: reviewed rows as the reviewer left them,
    the others from the latest verdict on their question, rows added by hand kept."""
    path = feedback_set_path(lake)
    rows: dict[str, dict[str, str]] = {}
    if path.exists():
        with path.open(encoding="utf-8-sig", newline="") as handle:
            for row in csv.DictReader(handle):
                rows[row.get("id") or ""] = {k: v or "" for k, v in row.items() if k is not None}
    for feedback in read_feedback(lake):
        row = gold_row(feedback)
        held = rows.get(row["id"])
        if held is None or not is_true_flag(held.get(REVIEW_COLUMN, "")):
            rows[row["id"]] = row
    columns = list(WATTBOT_COLUMNS) + list(EXTRA_COLUMNS)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows.values():
        writer.writerow({c: row.get(c, "") for c in columns})
    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, out.getvalue().encode())
    return path
