"""Sensors: the corpus folder → document partitions, the configs folder → config and
ensemble partitions. Each reads the lake and folders from the `settings` resource."""

import json
from collections.abc import Callable
from pathlib import Path

from dagster import (
    AddDynamicPartitionsRequest,
    DagsterRunStatus,
    DefaultSensorStatus,
    DeleteDynamicPartitionsRequest,
    DynamicPartitionsDefinition,
    ResourceParam,
    RunRequest,
    RunsFilter,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition

from kohaku_assets.jobs import answer_config_job, assemble_indexes_job, cross_ensemble_job, index_document_job
from kohaku_assets.partitions import DOCUMENTS, configs, documents, ensemble_specs
from kohaku_assets.resources import KohakuSettings
from kohaku_rag.answering.config_folder import config_files, configs_dir, ensemble_files, ensembles_dir
from kohaku_rag.answering.ensemble_spec import load_ensemble_spec
from kohaku_rag.answering.qa_config import load_qa_config
from kohaku_rag.answering.store import file_sha
from kohaku_rag.indexing import steps as ix
from kohaku_rag.indexing.corpus import scan_corpus
from kohaku_rag.models import ModelPool
from kohaku_rag.retrieval.retriever import open_vector_store

# ── the corpus ─────────────────────────────────────────────────────────────


def index_requests(
    settings: KohakuSettings, models: ModelPool, registered: set[str], in_flight: bool
) -> tuple[list[str], list[str], list[RunRequest]]:
    """(partitions to add, documents removed, runs to request) for the corpus as it is now."""
    lake, cfg = settings.lake, settings.index_config()
    scan = scan_corpus(settings.corpus, lake.sources_dir)
    plan = ix.plan_index(scan, lake, cfg, registered)
    new = sorted((set(scan.documents) | set(scan.missing)) - registered)
    # Run keys carry the content version, so an unchanged document is never requested twice.
    runs = [
        RunRequest(
            run_key=f"{doc_id}:{ix.embeddings_version(scan.documents[doc_id].content_hash, cfg)}",
            partition_key=doc_id,
            job_name=index_document_job.name,
        )
        for doc_id in plan.build
    ]
    # Listed in metadata.csv with a URL but not on disk: the source asset downloads it (once per URL).
    runs += [
        RunRequest(
            run_key=f"{doc_id}:fetch:{scan.missing[doc_id].url}", partition_key=doc_id, job_name=index_document_job.name
        )
        for doc_id in plan.fetch
    ]
    behind = not runs and not in_flight and (plan.remove or _indexes_behind(settings, models, plan.unchanged))
    if behind:
        runs.append(RunRequest(job_name=assemble_indexes_job.name))
    return new, plan.remove, runs


def _indexes_behind(settings: KohakuSettings, models: ModelPool, doc_ids: list[str]) -> bool:
    lake = settings.lake
    if not lake.vectors_path.exists() or not lake.bm25_path.exists():
        return bool(doc_ids)
    with open_vector_store(lake, models.embedder(settings.index_config().embedder, lake)) as store:
        have = store.document_versions()
    return any(have.get(d) != ix.stored_version(lake, ix.INDEX_ROWS, d) for d in doc_ids) or bool(
        set(have) - set(doc_ids)
    )


def _runs_in_flight(context: SensorEvaluationContext) -> bool:
    active = [
        DagsterRunStatus.QUEUED,
        DagsterRunStatus.STARTING,
        DagsterRunStatus.STARTED,
        DagsterRunStatus.NOT_STARTED,
    ]
    return bool(context.instance.get_runs(filters=RunsFilter(statuses=active), limit=1))


def _partition_requests(
    partitions: DynamicPartitionsDefinition, add: list[str], delete: list[str]
) -> list[AddDynamicPartitionsRequest | DeleteDynamicPartitionsRequest]:
    assert partitions.name is not None
    return [
        *([AddDynamicPartitionsRequest(partitions.name, add)] if add else []),
        *([DeleteDynamicPartitionsRequest(partitions.name, delete)] if delete else []),
    ]


@sensor(
    jobs=[index_document_job, assemble_indexes_job],
    minimum_interval_seconds=60,
    default_status=DefaultSensorStatus.STOPPED,
    description="Watches the corpus folder: adds, updates and deletes document partitions by content hash.",
)
def corpus_sensor(
    context: SensorEvaluationContext, settings: KohakuSettings, models: ResourceParam[ModelPool]
) -> SensorResult | SkipReason:
    registered = set(context.instance.get_dynamic_partitions(DOCUMENTS))
    new, removed, runs = index_requests(settings, models, registered, _runs_in_flight(context))
    if not (new or removed or runs):
        return SkipReason("corpus unchanged")
    for doc_id in removed:
        ix.remove_document(settings.lake, doc_id)
    return SensorResult(
        run_requests=runs,
        dynamic_partitions_requests=_partition_requests(documents, new, [d for d in removed if d in registered]),
    )


# ── the configs folder ─────────────────────────────────────────────────────


def sensor_plan(
    versions: dict[str, str], registered: set[str], cursor: dict[str, str]
) -> tuple[list[str], list[str], list[str]]:
    """(partitions to add, to delete, names to run) for files whose content hashes are `versions`;
    `cursor` holds each file's hash when it was last requested."""
    add = sorted(set(versions) - registered)
    delete = sorted(registered - set(versions))
    run = sorted(name for name, sha in versions.items() if cursor.get(name) != sha)
    return add, delete, run


def folder_sensor(
    name: str,
    partitions: DynamicPartitionsDefinition,
    job: UnresolvedAssetJobDefinition,
    files_of: Callable[[Path], dict[str, Path]],
    folder_of: Callable[[Path], Path],
    description: str,
    validate: Callable[[Path], object] = lambda _path: None,
) -> SensorDefinition:
    """A sensor keeping one partition per file of a folder, running new and edited files.
    A file that `validate` refuses (a ValueError naming the file, line and key) is not run:
    the sensor logs the error and runs it once the file changes again."""

    @sensor(
        name=name,
        jobs=[job],
        minimum_interval_seconds=30,
        default_status=DefaultSensorStatus.STOPPED,
        description=description,
    )
    def _sensor(context: SensorEvaluationContext, settings: KohakuSettings) -> SensorResult | SkipReason:
        folder = configs_dir(settings.lake)
        registered = set(context.instance.get_dynamic_partitions(str(partitions.name)))
        # The cursor holds each file's content hash when it was last requested.
        cursor = json.loads(context.cursor) if context.cursor else {}
        versions = {key: file_sha(path) for key, path in files_of(folder).items()}
        add, delete, run = sensor_plan(versions, registered, cursor)
        if not (add or delete or run):
            return SkipReason(f"nothing in {folder_of(folder)} changed")
        files = files_of(folder)
        refused = []
        for key in run:
            try:
                validate(files[key])
            except ValueError as exc:
                context.log.error(f"not run: {exc}")
                refused.append(key)
        run = [key for key in run if key not in refused]
        return SensorResult(
            run_requests=[
                RunRequest(run_key=f"{key}:{versions[key]}", partition_key=key, job_name=job.name) for key in run
            ],
            dynamic_partitions_requests=_partition_requests(partitions, add, delete),
            cursor=json.dumps(versions, sort_keys=True),
        )

    return _sensor


configs_sensor = folder_sensor(
    "configs_sensor",
    configs,
    answer_config_job,
    config_files,
    lambda folder: folder,
    "Watches the configs folder: one partition per config file; runs new and edited ones.",
    load_qa_config,
)
ensemble_specs_sensor = folder_sensor(
    "ensemble_specs_sensor",
    ensemble_specs,
    cross_ensemble_job,
    ensemble_files,
    ensembles_dir,
    "Watches the configs folder's ensembles/: one partition per spec file; runs new and edited ones.",
    load_ensemble_spec,
)

SENSORS = [corpus_sensor, configs_sensor, ensemble_specs_sensor]
