"""What people asked `kohaku serve`: the `served_answers` table, one partition per UTC day.

The server appends each answer to its day's Parquet file as it serves it
(kohaku_rag.serving.served); materializing a day reads that file back, checks it against
the declared schema and shows its rows in the UI, so a team sees what is asked, with which
config, how fast, and can turn real questions into an evaluation set."""

import statistics
from collections import Counter

from dagster import (
    AssetExecutionContext,
    DailyPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    TableColumn,
    TableRecord,
    TableSchema,
    asset,
)

from kohaku_assets.partitions import ANSWERING_GROUP, ANSWERING_TAGS, OWNERS
from kohaku_assets.resources import KohakuSettings
from kohaku_rag.serving.served import SERVED, day_path, read_day

# end_offset=1: today is a partition too (answers arrive all day; re-materialize to refresh it)
days = DailyPartitionsDefinition(start_date="2026-01-01", timezone="UTC", end_offset=1)

PREVIEW_ROWS = 20


@asset(
    name=SERVED,
    partitions_def=days,
    group_name=ANSWERING_GROUP,
    owners=OWNERS,
    tags=ANSWERING_TAGS,
    kinds={"parquet", "duckdb", "python"},
    code_version="1",
    description="Every question answered by `kohaku serve` that day (question, config, answer, refs, seconds, "
    "time; no client address), appended by the server to `LAKE/served_answers/DAY.parquet` (LAKE: the lake "
    "folder). Materializing a day shows its rows: "
    "`duckdb -c \"from 'LAKE/served_answers/*.parquet'\"` reads them all.",
)
def served_answers(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    path = day_path(settings.lake, context.partition_key)
    if not path.exists():
        return MaterializeResult(metadata={"questions": 0, "path": MetadataValue.path(str(path))})
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
    return MaterializeResult(
        metadata={
            "questions": len(rows),
            "answered_from_store": sum(r["stored"] for r in rows),
            "blank": sum(r["is_blank"] for r in rows),
            "median_seconds": round(statistics.median(seconds), 2) if seconds else None,
            "configs": MetadataValue.json(dict(configs)),
            "path": MetadataValue.path(str(path)),
            "latest": MetadataValue.table(preview, schema=schema),
        }
    )
