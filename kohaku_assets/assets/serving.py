"""What people asked `kohaku serve`: the `served_answers` table, one partition per UTC day
with answers; and what they said about the answers, `served_feedback`, with the `feedback`
question set built from it.

Every server process on the lake appends each answer to the lake's served store as it
serves it (kohaku_rag.serving.served_store: SQLite in WAL mode, `served/served.sqlite`);
`served_answers_sensor` registers each day with answers as a partition and records the
day's rows as its materialization when they change, so a team sees in the UI what is
asked, with which config, how fast, and can turn real questions into an evaluation set.
Materializing a day from the UI reads the store back the same way."""

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
from kohaku_assets.resources import KohakuSettings
from kohaku_rag.answers.question_files import REVIEW_COLUMN, is_true_flag
from kohaku_rag.lake.csv_cells import read_rows
from kohaku_rag.lake.layout import Lake
from kohaku_rag.serving.feedback import FEEDBACK, feedback_set_path, read_feedback, write_question_set
from kohaku_rag.serving.served_answers import SERVED, day_rows
from kohaku_rag.serving.served_store import store_path

PREVIEW_ROWS = 20


def day_metadata(lake: Lake, day: str) -> dict[str, Any]:
    """What the UI shows for one day: counts, the median time to answer, the configs
    asked, and the latest rows."""
    path = store_path(lake)
    rows = day_rows(lake, day)
    if not rows:
        return {"questions": 0, "path": MetadataValue.path(str(path))}
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
    kinds={"sqlite", "python"},
    code_version="2",
    description="Every question answered by `kohaku serve` that day (question, config, answer, refs, seconds, "
    "time; no client address), appended by every server process on the lake to the `answers` table of "
    "`<lake>/served/served.sqlite` (SQLite, WAL); served_answers_sensor adds each day with answers as a "
    "partition and records its rows when they change. `sqlite3 -readonly <lake>/served/served.sqlite "
    "'select * from answers'` reads them all.",
)
def served_answers(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    return MaterializeResult(metadata=day_metadata(settings.lake, context.partition_key))


def feedback_metadata(settings: KohakuSettings, path: Path) -> dict[str, Any]:
    """Counts of the verdicts and of the question set's rows, reviewed or waiting."""
    verdicts = Counter(r["verdict"] for r in read_feedback(settings.lake))
    rows = []
    if path.exists():
        with path.open(encoding="utf-8", newline="") as handle:
            rows = list(read_rows(handle))
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
    kinds={"sqlite", "csv", "python"},
    code_version="2",
    description="What users said about served answers (right, or wrong with a correction), appended by every "
    "server process to the `feedback` table of `<lake>/served/served.sqlite` (reviewers' decisions in its "
    "`reviews` table), and the `feedback` question set built from it, "
    "`qa/question_sets/feedback.csv` (a WattBot question file; a row counts once a reviewer sets `reviewed` to "
    'yes). A config with `questions = "feedback"` scores on it through the same leaderboard.',
)
def served_feedback(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    path = feedback_set_path(settings.lake)
    if read_feedback(settings.lake) or path.exists():
        path = write_question_set(settings.lake)
    return MaterializeResult(metadata=feedback_metadata(settings, path))
