"""The Dagster code location: assets, the corpus sensor and the re-indexing schedule."""


from dagster import (
    AddDynamicPartitionsRequest,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    DeleteDynamicPartitionsRequest,
    Definitions,
    RunRequest,
    ScheduleEvaluationContext,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    define_asset_job,
    schedule,
    sensor,
)

from kohaku_assets.assets import INDEXES, PER_DOCUMENT
from kohaku_assets.partitions import documents
from kohaku_assets.cross_ensembles import CROSS_ASSETS, cross_ensemble_job, ensemble_specs_sensor
from kohaku_assets.qa import QA_ASSETS, answer_config_job, configs_sensor
from kohaku_assets.settings import KohakuSettings
from kohaku_rag import indexing as ix
from kohaku_rag.corpus import scan_corpus
from kohaku_rag.search import open_vector_store

index_document_job = define_asset_job("index_document", selection=PER_DOCUMENT, partitions_def=documents,
                                      description="Parse, embed and prepare the index rows of one document.")
assemble_indexes_job = define_asset_job("assemble_indexes", selection=INDEXES,
                                        description="Upsert changed documents into sqlite-vec and rebuild BM25.")

settings = KohakuSettings()


def _index_requests(registered: set[str], in_flight: bool) -> tuple[list[str], list[str], list[RunRequest]]:
    lake = settings.lake
    scan = scan_corpus(settings.corpus, lake.sources_dir)
    plan = ix.plan_index(scan, lake, settings.index_config(), registered)
    new = sorted((set(scan.documents) | set(scan.missing)) - registered)
    # Run keys carry the content version, so an unchanged document is never requested twice.
    runs = [
        RunRequest(run_key=f"{doc_id}:{ix.embeddings_version(scan.documents[doc_id].content_hash, settings.index_config())}",
                   partition_key=doc_id, job_name=index_document_job.name)
        for doc_id in plan.build
    ]
    # Listed in metadata.csv with a URL but not on disk: the source asset downloads it (once per URL).
    runs += [RunRequest(run_key=f"{doc_id}:fetch:{scan.missing[doc_id].url}", partition_key=doc_id,
                        job_name=index_document_job.name) for doc_id in plan.fetch]
    behind = not runs and not in_flight and (plan.remove or _indexes_behind(plan.unchanged))
    if behind:
        runs.append(RunRequest(job_name=assemble_indexes_job.name))
    return new, plan.remove, runs


def _indexes_behind(doc_ids: list[str]) -> bool:
    lake = settings.lake
    if not lake.vectors_path.exists() or not lake.bm25_path.exists():
        return bool(doc_ids)
    with open_vector_store(lake, settings.embedder()) as store:
        have = store.document_versions()
    return any(have.get(d) != ix.stored_version(lake, ix.INDEX_ROWS, d) for d in doc_ids) or bool(set(have) - set(doc_ids))


@sensor(jobs=[index_document_job, assemble_indexes_job], minimum_interval_seconds=60,
        default_status=DefaultSensorStatus.STOPPED,
        description="Watches the corpus folder: adds, updates and deletes document partitions by content hash.")
def corpus_sensor(context: SensorEvaluationContext) -> SensorResult | SkipReason:
    registered = set(context.instance.get_dynamic_partitions(documents.name))
    in_flight = _runs_in_flight(context)
    new, removed, runs = _index_requests(registered, in_flight)
    if not (new or removed or runs):
        return SkipReason("corpus unchanged")
    for doc_id in removed:
        ix.remove_document(settings.lake, doc_id)
    return SensorResult(
        run_requests=runs,
        dynamic_partitions_requests=[
            *([AddDynamicPartitionsRequest(documents.name, new)] if new else []),
            *([DeleteDynamicPartitionsRequest(documents.name, [d for d in removed if d in registered])] if removed else []),
        ],
    )


def _runs_in_flight(context: SensorEvaluationContext) -> bool:
    from dagster import DagsterRunStatus, RunsFilter

    active = [DagsterRunStatus.QUEUED, DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.NOT_STARTED]
    return bool(context.instance.get_runs(filters=RunsFilter(statuses=active), limit=1))


@schedule(cron_schedule="0 3 * * *", job=index_document_job, default_status=DefaultScheduleStatus.STOPPED,
          description="Nightly re-index of stale registered documents (after a config or code change); "
                      "the indexes then re-assemble through their automation condition.")
def nightly_reindex(context: ScheduleEvaluationContext) -> list[RunRequest] | SkipReason:
    registered = set(context.instance.get_dynamic_partitions(documents.name))
    _, _, runs = _index_requests(registered, in_flight=False)
    stale = [r for r in runs if r.partition_key in registered]
    return stale or SkipReason("every registered document is up to date")


defs = Definitions(
    assets=[*PER_DOCUMENT, *INDEXES, *QA_ASSETS, *CROSS_ASSETS],
    jobs=[index_document_job, assemble_indexes_job, answer_config_job, cross_ensemble_job],
    sensors=[corpus_sensor, configs_sensor, ensemble_specs_sensor],
    schedules=[nightly_reindex],
    resources={"settings": settings},
)
