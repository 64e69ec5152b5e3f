"""What people asked `kohaku serve`: the `served_answers` table, one partition per UTC day
with answers; and what they said about the answers, `served_feedback`, with the `feedback`
question set built from it.

The server appends each answer to its day's Parquet file as it serves it
(kohaku_rag.serving.served); `served_answers_sensor` registers each such day as a partition
and records the file's rows as the day's materialization when the file changes, so a team
sees in the UI what is asked, with which config, how fast, and can turn real questions into
an evaluation set. Materializing a day from the UI reads the file back the same way."""

import csv
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from dagster import (
    AssetExecutionContext,
    MaterializeResult,
    MetadataValue,
    TableColumn,
    TableRecord,
    TableSchema,
    asset,
)

from kohaku_assets.partitions import ANSWERING_GROUP, ANSWERING_TAGS, OWNERS, served_days
from kohaku_assets.resources import KohakuSettings, lake_path
from kohaku_rag.evaluation.wattbot_csv import REVIEW_COLUMN, is_true_flag
from kohaku_rag.serving.feedback import FEEDBACK, feedback_set_path, read_feedback, write_question_set
from kohaku_rag.serving.served import SERVED, day_path, read_day

PREVIEW_ROWS = 20


def day_metadata(path: Path) -> dict[str, Any]:
    """What the UI shows for one day's file: counts, the median time to answer, the configs
    asked, and the latest rows."""
    if not path.exists():
        return {"questions": 0, "path": MetadataValue.path(str(path))}
    rows = read_day(path).to_pylist()
    seconds = [r["seconds"] for r in rows if not r["stored"]]
    configs = Counter(r["config"] for r in rows)
    preview = [
        TableRecord(
            {
                "time": r["time"].strftime("%H:%M:%S"),
                "question": r["question"][:160],
                "config": r["config"],
                "answer": r["answer"][:80],
                "refs": ", ".join(r["refs"]),
                "seconds": round(r["seconds"], 2),
            }
        )
        for r in rows[-PREVIEW_ROWS:]
    ]
    schema = TableSchema(
        [TableColumn(n, t) for n, t in (("time", "string"), ("question", "string"), ("config", "string"),
                                         ("answer", "string"), ("refs", "string"), ("seconds", "float"))]
    )  # fmt: skip
    return {
        "questions": len(rows),
        "answered_from_store": sum(r["stored"] for r in rows),
        "blank": sum(r["is_blank"] for r in rows),
        "median_seconds": round(statistics.median(seconds), 2) if seconds else None,
        "configs": MetadataValue.json(dict(configs)),
        "path": MetadataValue.path(str(path)),
        "latest": MetadataValue.table(preview, schema=schema),
    }


@asset(
    name=SERVED,
    partitions_def=served_days,
    group_name=ANSWERING_GROUP,
    owners=OWNERS,
    tags=ANSWERING_TAGS,
    kinds={"parquet", "duckdb", "python"},
    code_version="1",
    description="Every question answered by `kohaku serve` that day (question, config, answer, refs, seconds, "
    f"time; no client address), appended by the server to `{lake_path(SERVED)}/DAY.parquet`; "
    "served_answers_sensor adds each day with answers as a partition and records its rows when they change. "
    f"`duckdb -c \"from '{lake_path(SERVED, '*.parquet')}'\"` reads them all.",
)
def served_answers(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    return MaterializeResult(metadata=day_metadata(day_path(settings.lake, context.partition_key)))


def feedback_metadata(settings: KohakuSettings, path: Path) -> dict[str, Any]:
    """Counts of the verdicts and of the question set's rows, reviewed or waiting."""
    verdicts = Counter(r["verdict"] for r in read_feedback(settings.lake))
    rows = []
    if path.exists():
        with path.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.DictReader(handle))
    reviewed = sum(is_true_flag(r.get(REVIEW_COLUMN) or "") for r in rows)
    return {
        "verdicts": sum(verdicts.values()),
        "right": verdicts.get("right", 0),
        "wrong": verdicts.get("wrong", 0),
        "questions": len(rows),
        "reviewed": reviewed,
        "waiting_for_review": len(rows) - reviewed,
        "question_set": MetadataValue.path(str(path)),
    }


@asset(
    name=FEEDBACK,
    group_name=ANSWERING_GROUP,
    owners=OWNERS,
    tags=ANSWERING_TAGS,
    kinds={"parquet", "csv", "python"},
    code_version="1",
    description="What users said about served answers (right, or wrong with a correction), kept by the server in "
    f"`{lake_path(FEEDBACK, 'data.parquet')}`, and the `feedback` question set built from it, "
    "`qa/question_sets/feedback.csv` (a WattBot question file; a row counts once a reviewer sets `reviewed` to "
    'yes). A config with `questions = "feedback"` scores on it through the same leaderboard.',
)
def served_feedback(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    path = write_question_set(settings.lake) if read_feedback(settings.lake) else feedback_set_path(settings.lake)
    return MaterializeResult(metadata=feedback_metadata(settings, path))
