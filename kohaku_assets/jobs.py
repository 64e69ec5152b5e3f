"""The jobs the sensors, the schedule, the UI and the CLI (kohaku_assets.runner) launch.

Every step of a run executes in the run's own process (`in_process_executor`): one
process per run, not one per step (six per document, each importing the code location:
bench/serving/ui_smoke.py timed a document materialized from the UI at 24-26 s before, 7-10 s after).
A step that raises still fails only its run (its downstream steps are skipped), and each
document and config is its own run, in its own process when the UI or a sensor launches it,
so one broken document or config (even one that crashes its process) never fails another's.

The per-document and per-config jobs use `kohaku_executor` (kohaku_assets.cluster): the
same, unless `KOHAKU_CELERY_BROKER` is set when a run starts, then their steps run on Celery
workers; the two writers (indexes, leaderboard) stay
in the run's process and carry the `kohaku/writer` tag the run queue limits to one run each.
"""

from dagster import define_asset_job, in_process_executor

from kohaku_assets.assets import (
    INDEXES,
    PER_CONFIG,
    PER_DOCUMENT,
    cross_ensemble,
    leaderboard,
    sweep_report,
    table_repairs,
)
from kohaku_assets.cluster import WRITER_TAG, kohaku_executor
from kohaku_assets.partitions import configs, documents, ensemble_specs, sweeps

index_document_job = define_asset_job(
    "index_document",
    selection=PER_DOCUMENT,
    partitions_def=documents,
    description="Parse, embed and prepare the index rows of one document.",
    executor_def=kohaku_executor,
)
repair_tables_job = define_asset_job(
    "repair_tables",
    selection=[table_repairs],
    partitions_def=documents,
    description="Repair the text tables of one document the parser could not align (index setting table_repair).",
    executor_def=kohaku_executor,
)
assemble_indexes_job = define_asset_job(
    "assemble_indexes",
    selection=INDEXES,
    description="Upsert changed documents into sqlite-vec and rebuild BM25.",
    tags={WRITER_TAG: "indexes"},
    executor_def=in_process_executor,
)
answer_config_job = define_asset_job(
    "answer_config",
    selection=PER_CONFIG,
    partitions_def=configs,
    description="Questions → retrievals → predictions → ensembles → scores and submission CSV of one config.",
    executor_def=kohaku_executor,
)
cross_ensemble_job = define_asset_job(
    "vote_ensemble",
    selection=[cross_ensemble],
    partitions_def=ensemble_specs,
    description="Vote the stored runs of the configs an ensemble spec names.",
    executor_def=kohaku_executor,
)
leaderboard_job = define_asset_job(
    "update_leaderboard",
    selection=[leaderboard],
    description="Every scored config and ensemble in one table (after `kohaku eval`; the UI's runs "
    "update it through its automation condition).",
    tags={WRITER_TAG: "leaderboard"},
    executor_def=in_process_executor,
)

sweep_report_job = define_asset_job(
    "report_sweep",
    selection=[sweep_report],
    partitions_def=sweeps,
    description="A sweep's table and plots from the leaderboard (after its members are computed).",
    executor_def=in_process_executor,
)

JOBS = [
    index_document_job,
    repair_tables_job,
    assemble_indexes_job,
    answer_config_job,
    cross_ensemble_job,
    leaderboard_job,
    sweep_report_job,
]
