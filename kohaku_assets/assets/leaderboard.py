"""The leaderboard: every scored config and ensemble in one Parquet table."""

from collections.abc import Collection

import pyarrow as pa
from dagster import (
    AssetExecutionContext,
    DagsterEventType,
    DagsterInstance,
    DagsterRunStatus,
    MaterializeResult,
    MetadataValue,
    RunsFilter,
    asset,
)

from kohaku_assets.assets.answering import scores
from kohaku_assets.assets.ensembles import cross_ensemble
from kohaku_assets.assets.indexes import after_deps_update
from kohaku_assets.partitions import ANSWERING_GROUP, ANSWERING_TAGS, OWNERS
from kohaku_assets.resources import KohakuSettings, lake_path
from kohaku_assets.writer_lock import lake_writer
from kohaku_rag.answering import qa_tables as st
from kohaku_rag.answering.config_folder import config_files, configs_dir
from kohaku_rag.evaluation.leaderboard import leaderboard_markdown, leaderboard_rows
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import write_parquet_atomic

# The tag Dagster gives a partitioned run (its public name has no public import).
PARTITION_TAG = "dagster/partition"
# eager() waits while any dep is missing: with one partition of `scores` or of
# `cross_ensemble` never materialized (a spec not voted yet) it never fires.
REFRESH_WHEN = after_deps_update("refresh after any score update")


@asset(
    group_name=ANSWERING_GROUP,
    deps=[scores, cross_ensemble],
    owners=OWNERS,
    tags=ANSWERING_TAGS,
    kinds={"parquet", "duckdb", "python"},
    code_version="1",
    automation_condition=REFRESH_WHEN,
    description="Every scored config and ensemble in one Parquet table: "
    f"`{lake_path('qa', 'leaderboard.parquet')}` (in Python: `duckdb.sql(\"from '<that file>'\").show()`; DuckDB "
    "is installed with kohaku-lake, its `duckdb` command is not); each row's `index_version` is the "
    "index its answers were retrieved from (the `vector_index` data version); `not_scored` names the configs never "
    "run (their `scores` partitions show as missing). Up to date when "
    "refreshed after the latest scores and cross-config ensembles (automation condition, sensor on).",
)
@lake_writer
def leaderboard(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    rows = leaderboard_rows(settings.lake)
    # Rows list the answers stored under the current index (their keys include it), so this
    # is the index of every row; a later re-index leaves these rows naming the old one.
    index = index_version(settings.lake)
    rows = [{**row, "index_version": index} for row in rows]
    path = st.leaderboard_path(settings.lake)
    write_parquet_atomic(pa.Table.from_pylist(rows) if rows else pa.table({"config": pa.array([], pa.string())}), path)
    failures = failed_configs(context.instance, settings.lake, rows)
    waiting = not_scored(settings.lake, rows, set(failures))
    if waiting:
        context.log.info(f"not on the leaderboard yet: {waiting}")
    failed = "; ".join(f"{name} (failed: {reason})" for name, reason in sorted(failures.items()))
    return MaterializeResult(
        metadata={
            "configs": len(rows),
            # Why `scores` shows missing partitions: configs that were never run (not an error).
            "not_scored": waiting or "none",
            # ... and configs whose last run failed, with why (not "never run").
            "failed": failed or "none",
            "index_version": index,
            "path": MetadataValue.path(str(path)),
            "table": MetadataValue.md(leaderboard_markdown(rows)),
        }
    )


def failed_configs(instance: DagsterInstance, lake: Lake, rows: list[dict]) -> dict[str, str]:
    """The configs with no row whose latest `answer_config` run failed, each with the reason
    the run gave (its failed step's message)."""
    scored = {str(r["config"]) for r in rows}
    out = {}
    for name in sorted(set(config_files(configs_dir(lake))) - scored):
        runs = instance.get_runs(RunsFilter(job_name="answer_config", tags={PARTITION_TAG: name}), limit=1)
        if runs and runs[0].status is DagsterRunStatus.FAILURE:
            out[name] = _failure_reason(instance, runs[0].run_id)
    return out


def _failure_reason(instance: DagsterInstance, run_id: str) -> str:
    for record in instance.all_logs(run_id, of_type=DagsterEventType.STEP_FAILURE):
        error = record.dagster_event.step_failure_data.error if record.dagster_event else None
        cause = error.cause if error is not None and error.cause is not None else error
        if cause is not None:
            message = " ".join(cause.message.split())
            # the class path Dagster prefixes ("dagster._core...Failure: ") is no part of the reason
            return message.split(": ", 1)[-1] if message.split(":", 1)[0].count(".") else message
    return "the run failed (see its logs)"


def not_scored(lake: Lake, rows: list[dict], failed: Collection[str] = ()) -> str:
    """The configs in the configs folder with no row yet and no failed run, and how to run one."""
    names = sorted(set(config_files(configs_dir(lake))) - {str(r["config"]) for r in rows} - set(failed))
    if not names:
        return ""
    return (
        f"{', '.join(names)} (never run, so their `scores` partitions show as missing; run one with "
        "`kohaku eval --config NAME` or materialize its `answer_config` partition)"
    )


def index_version(lake: Lake) -> str:
    """The index fingerprint stored answers are keyed by ("" when nothing is indexed)."""
    try:
        return st.index_fingerprint(lake)
    except FileNotFoundError:
        return ""
