"""The nightly re-index of stale registered documents."""

from dagster import DefaultScheduleStatus, RunRequest, ScheduleEvaluationContext, SkipReason, schedule

from kohaku_assets.jobs import index_document_job
from kohaku_assets.partitions import DOCUMENTS
from kohaku_assets.resources import KohakuSettings
from kohaku_assets.sensors import index_requests


@schedule(
    cron_schedule="0 3 * * *",
    job=index_document_job,
    default_status=DefaultScheduleStatus.STOPPED,
    description="Nightly re-index of stale registered documents (after a config or code change); "
    "the indexes then re-assemble through their automation condition.",
)
def nightly_reindex(context: ScheduleEvaluationContext, settings: KohakuSettings) -> list[RunRequest] | SkipReason:
    registered = set(context.instance.get_dynamic_partitions(DOCUMENTS))
    _, _, runs = index_requests(settings, registered, in_flight=False)
    stale = [r for r in runs if r.partition_key in registered]
    return stale or SkipReason("every registered document is up to date")


SCHEDULES = [nightly_reindex]
