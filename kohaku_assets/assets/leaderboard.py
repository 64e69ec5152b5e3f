"""The leaderboard: every scored config and ensemble in one Parquet table."""

import pyarrow as pa
from dagster import AssetExecutionContext, AutomationCondition, MaterializeResult, MetadataValue, asset

from kohaku_assets.assets.answering import scores
from kohaku_assets.assets.ensembles import cross_ensemble
from kohaku_assets.partitions import ANSWERING_GROUP
from kohaku_assets.resources import KohakuSettings
from kohaku_rag.answering import store as st
from kohaku_rag.answering.leaderboard import leaderboard_markdown, leaderboard_rows
from kohaku_rag.lake import write_parquet_atomic


@asset(
    group_name=ANSWERING_GROUP,
    deps=[scores, cross_ensemble],
    code_version="1",
    automation_condition=AutomationCondition.eager(),
    description="Every scored config and ensemble in one Parquet table: "
    "duckdb -c \"from '<lake>/qa/leaderboard.parquet'\".",
)
def leaderboard(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    rows = leaderboard_rows(settings.lake)
    path = st.leaderboard_path(settings.lake)
    write_parquet_atomic(pa.Table.from_pylist(rows) if rows else pa.table({"config": pa.array([], pa.string())}), path)
    return MaterializeResult(
        metadata={"configs": len(rows), "path": str(path), "table": MetadataValue.md(leaderboard_markdown(rows))}
    )
