"""Sensors: the corpus folder → document partitions, the configs folder → config and
ensemble partitions, its sweeps/ folder → sweep partitions and their members' config
partitions. Each reads the lake and folders from the `settings` resource."""

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dagster import (
    AddDynamicPartitionsRequest,
    AssetMaterialization,
    DagsterRunStatus,
    DefaultSensorStatus,
    DeleteDynamicPartitionsRequest,
    DynamicPartitionsDefinition,
    RunRequest,
    RunsFilter,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from kohaku_assets.assets.serving import day_metadata, feedback_metadata
from kohaku_assets.dagster_private import RUN_KEY_TAG, UnresolvedAssetJobDefinition
from kohaku_assets.jobs import answer_config_job, assemble_indexes_job, cross_ensemble_job, index_document_job
from kohaku_assets.partitions import (
    CONFIGS,
    DOCUMENTS,
    SERVED_DAYS,
    SWEEPS,
    configs,
    documents,
    ensemble_specs,
    served_days,
    sweeps,
)
from kohaku_assets.resources import KohakuSettings
from kohaku_rag.answering.config_folder import config_files, configs_dir, ensemble_files, ensembles_dir
from kohaku_rag.answering.ensemble_spec import load_ensemble_spec
from kohaku_rag.answering.qa_config_file import dump_json, load_qa_config
from kohaku_rag.answering.qa_tables import file_sha
from kohaku_rag.answers.question_files import load_questions
from kohaku_rag.config_files import stable_hash
from kohaku_rag.experiments.cost import estimate
from kohaku_rag.experiments.sweep import expand, load_sweep, sweep_files, sweep_members, write_members
from kohaku_rag.indexing import steps as ix
from kohaku_rag.indexing.assembly import indexes_behind
from kohaku_rag.indexing.corpus import scan_corpus
from kohaku_rag.indexing.index_plan import plan_index
from kohaku_rag.serving.feedback import FEEDBACK, feedback_set_path, feedback_version
from kohaku_rag.serving.served_answers import SERVED, day_versions

# ── the corpus ─────────────────────────────────────────────────────────────


def index_requests(
    settings: KohakuSettings,
    registered: set[str],
    in_flight: bool,
    already_requested: Callable[[Sequence[str]], set[str]] = lambda _keys: set(),
) -> tuple[list[str], list[str], list[RunRequest]]:
    """(partitions to add, documents removed, runs to request) for the corpus as it is now.

    A document whose current version failed before is not requested again (see
    kohaku_rag.indexing.failures); a UI materialization retries it. The indexes are
    requested whenever they differ from the per-document tables and no document run is
    pending, so one failed document never holds back the others' assembly."""
    lake, cfg = settings.lake, settings.index_config()
    scan = scan_corpus(settings.corpus, lake.sources_dir, follow_links=settings.follow_links)
    plan = plan_index(scan, lake, cfg, registered)
    new = sorted((set(scan.documents) | set(scan.missing)) - registered)

    # Run keys carry the content version, so an unchanged document is never requested twice.
    def version(doc_id: str) -> str:
        return ix.embeddings_version(scan.documents[doc_id].content_hash, cfg, ix.repaired_of(lake, doc_id, cfg))

    runs = [
        RunRequest(
            run_key=f"{doc_id}:{version(doc_id)}",
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
    # Dagster drops a request whose run key already ran; counting it would wait for a run
    # that never comes (a failed download or backend outage keeps its key until it changes).
    used = already_requested([r.run_key for r in runs if r.run_key is not None])
    runs = [r for r in runs if r.run_key is None or r.run_key not in used]
    keep = sorted(set(scan.documents) | set(scan.missing))
    if not runs and not in_flight and (plan.remove or indexes_behind(lake, keep, settings.corpus).behind):
        runs.append(RunRequest(job_name=assemble_indexes_job.name))
    return new, plan.remove, runs


# Run keys looked up per query: one query per key cost 2 ms each (204 s of a 100k-document
# tick, bench/indexing/scale.py partitions); a bounded batch stays under SQLite's variable limit.
RUN_KEY_BATCH = 500


def _run_keys_used(context: SensorEvaluationContext, run_keys: Sequence[str]) -> set[str]:
    """The run keys among `run_keys` that some run already carries."""
    used: set[str] = set()
    for start in range(0, len(run_keys), RUN_KEY_BATCH):
        batch = list(run_keys[start : start + RUN_KEY_BATCH])
        for run in context.instance.get_runs(filters=RunsFilter(tags={RUN_KEY_TAG: batch})):
            used.add(run.tags.get(RUN_KEY_TAG, ""))
    return used & set(run_keys)


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
def corpus_sensor(context: SensorEvaluationContext, settings: KohakuSettings) -> SensorResult | SkipReason:
    registered = set(context.instance.get_dynamic_partitions(DOCUMENTS))
    new, removed, runs = index_requests(
        settings, registered, _runs_in_flight(context), lambda keys: _run_keys_used(context, keys)
    )
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


@dataclass(frozen=True)
class FolderCursor:
    """A folder sensor's cursor: each file's hash when it was last seen, and when the sensor
    was (last) turned on. A tick whose sensor was turned on since is a baseline: the files
    already there are recorded, not run, so turning the sensor on never starts a long run
    nobody asked for (the bundled model answering `default` takes ~30 minutes)."""

    versions: dict[str, str]
    started: float | None

    @staticmethod
    def parse(raw: str | None, started: float | None) -> "FolderCursor | None":
        """None: no cursor yet (a baseline tick). A cursor of an earlier version (the bare
        hashes) continues as if the sensor had been on since."""
        if not raw:
            return None
        data = json.loads(raw)
        if "versions" not in data:
            return FolderCursor(data, started)
        return FolderCursor(data["versions"], data.get("started"))

    def dump(self) -> str:
        return json.dumps({"versions": self.versions, "started": self.started}, sort_keys=True)


def baseline_message(folder: Path, names: Sequence[str]) -> str:
    return (
        f"not run: {', '.join(names)} (in {folder} when the sensor was turned on; it runs files added or "
        f"changed from now on). Run one with `kohaku eval --config NAME` or materialize its partition in the UI."
    )


def _estimate_line(settings: KohakuSettings, key: str, path: Path) -> str:
    """What a config's run will cost (LLM calls not stored yet × measured seconds per call),
    logged before the sensor requests it."""
    try:
        return f"{key}: estimate {estimate(settings.lake, [load_qa_config(path)]).summary()}"
    except (ValueError, OSError) as exc:  # no index yet, an unreadable question file
        return f"{key}: no estimate ({exc})"


def folder_sensor(
    name: str,
    partitions: DynamicPartitionsDefinition,
    job: UnresolvedAssetJobDefinition,
    files_of: Callable[[Path], dict[str, Path]],
    folder_of: Callable[[Path], Path],
    description: str,
    validate: Callable[[Path], object] = lambda _path: None,
    run_elsewhere: Callable[[KohakuSettings], set[str]] = lambda _settings: set(),
    cost: Callable[[KohakuSettings, str, Path], str] | None = None,
) -> SensorDefinition:
    """A sensor keeping one partition per file of a folder, running files added or edited
    after it was turned on (see FolderCursor; the first tick registers every file and runs
    none, saying so in its log). A file that `validate` refuses (a ValueError naming the
    file, line and key) is not run: the sensor logs the error and runs it once the file
    changes again. Files named by `run_elsewhere` (a sweep's members, which `sweeps_sensor`
    runs) get a partition, no run. `cost` logs each run's estimate before it is requested."""

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
        started = context.last_sensor_start_time
        cursor = FolderCursor.parse(context.cursor, started)
        files = files_of(folder)
        versions = {key: file_sha(path) for key, path in files.items()}
        if cursor is None or cursor.started != started:  # turned on (again) since the last tick
            add, delete, _ = sensor_plan(versions, registered, {})
            if versions:
                context.log.info(baseline_message(folder_of(folder), sorted(versions)))
            return SensorResult(
                dynamic_partitions_requests=_partition_requests(partitions, add, delete),
                cursor=FolderCursor(versions, started).dump(),
                skip_reason=f"turned on: {len(versions)} file(s) already in {folder_of(folder)} recorded, not run "
                "(files added or changed from now on are run)",
            )
        add, delete, run = sensor_plan(versions, registered, cursor.versions)
        if not (add or delete or run):
            return SkipReason(f"nothing in {folder_of(folder)} changed")
        refused = []
        for key in run:
            try:
                validate(files[key])
            except ValueError as exc:
                context.log.error(f"not run: {exc}")
                refused.append(key)
        others = run_elsewhere(settings)
        run = [key for key in run if key not in refused and key not in others]
        if cost is not None:
            for key in run:
                context.log.info(cost(settings, key, files[key]))
        return SensorResult(
            run_requests=[
                RunRequest(run_key=f"{key}:{versions[key]}", partition_key=key, job_name=job.name) for key in run
            ],
            dynamic_partitions_requests=_partition_requests(partitions, add, delete),
            cursor=FolderCursor(versions, started).dump(),
        )

    return _sensor


configs_sensor = folder_sensor(
    "configs_sensor",
    configs,
    answer_config_job,
    config_files,
    lambda folder: folder,
    "Watches the configs folder: one partition per config file; runs the files added or edited after it was "
    "turned on, logging each run's cost estimate first (the configs already there are registered, not run; "
    "a sweep's members: sweeps_sensor runs them).",
    load_qa_config,
    lambda settings: sweep_members(settings.lake),
    _estimate_line,
)
ensemble_specs_sensor = folder_sensor(
    "ensemble_specs_sensor",
    ensemble_specs,
    cross_ensemble_job,
    ensemble_files,
    ensembles_dir,
    "Watches the configs folder's ensembles/: one partition per spec file; runs the files added or edited "
    "after it was turned on.",
    load_ensemble_spec,
)


# ── the sweeps folder ──────────────────────────────────────────────────────


def _sweep_version(settings: KohakuSettings, path: Path) -> str:
    """What a sweep expands to (its members' configs, so an edited base config counts too);
    a sweep that does not load is versioned by its file, to be reported once per edit."""
    try:
        return stable_hash([dump_json(m.config) for m in expand(load_sweep(settings.lake, path))])
    except (ValueError, OSError):
        return f"invalid:{file_sha(path)}"


@sensor(
    jobs=[answer_config_job],
    minimum_interval_seconds=30,
    default_status=DefaultSensorStatus.STOPPED,
    description="Watches the configs folder's sweeps/: writes each sweep's member configs, registers them and "
    "the sweep, and runs the members of new and edited sweeps (stored work is reused; the report follows the "
    "leaderboard).",
)
def sweeps_sensor(context: SensorEvaluationContext, settings: KohakuSettings) -> SensorResult | SkipReason:
    lake = settings.lake
    files = sweep_files(lake)
    versions = {name: _sweep_version(settings, path) for name, path in files.items()}
    registered = set(context.instance.get_dynamic_partitions(SWEEPS))
    cursor = json.loads(context.cursor) if context.cursor else {}
    add, delete, changed = sensor_plan(versions, registered, cursor)
    if not (add or delete or changed):
        return SkipReason("no sweep changed")
    known = set(context.instance.get_dynamic_partitions(CONFIGS))
    runs: list[RunRequest] = []
    new_configs: list[str] = []
    gone_configs: list[str] = []
    for name in changed:
        try:
            members, removed = write_members(lake, load_sweep(lake, files[name]))
        except ValueError as exc:
            context.log.error(f"not run: {exc}")
            continue
        new_configs += [m.name for m in members if m.name not in known]
        gone_configs += [n for n in removed if n in known]
        runs += [
            RunRequest(
                run_key=f"sweep:{name}:{m.name}:{versions[name]}", partition_key=m.name, job_name=answer_config_job.name
            )
            for m in members
        ]
    return SensorResult(
        run_requests=runs,
        dynamic_partitions_requests=[
            *_partition_requests(sweeps, add, delete),
            *_partition_requests(configs, sorted(set(new_configs)), sorted(set(gone_configs))),
        ],
        cursor=json.dumps(versions, sort_keys=True),
    )


# ── what `kohaku serve` answered ───────────────────────────────────────────


@sensor(
    minimum_interval_seconds=60,
    default_status=DefaultSensorStatus.RUNNING,
    asset_selection=[SERVED],  # listed under the asset's Automations, like served_feedback_sensor
    description="Registers each day `kohaku serve` answered questions as a `served_answers` partition and records "
    "the day's rows as its materialization when they change (no run is launched: it reads the served store).",
)
def served_answers_sensor(context: SensorEvaluationContext, settings: KohakuSettings) -> SensorResult | SkipReason:
    versions = day_versions(settings.lake)
    seen = json.loads(context.cursor) if context.cursor else {}
    changed = sorted(day for day, version in versions.items() if seen.get(day) != version)
    if not changed:
        return SkipReason("no served answers since the last tick")
    registered = set(context.instance.get_dynamic_partitions(SERVED_DAYS))
    events = [
        AssetMaterialization(asset_key=SERVED, partition=day, metadata=day_metadata(settings.lake, day))
        for day in changed
    ]
    context.log.info(f"recorded {len(changed)} day(s) of served answers: {', '.join(changed)}")
    return SensorResult(
        asset_events=events,
        dynamic_partitions_requests=_partition_requests(served_days, sorted(set(changed) - registered), []),
        cursor=json.dumps(versions, sort_keys=True),
    )


@sensor(
    minimum_interval_seconds=60,
    default_status=DefaultSensorStatus.RUNNING,
    # The asset it records, so the asset's page lists it under Automations (it launches no
    # run: the target only names what it keeps up to date).
    asset_selection=[FEEDBACK],
    description="Records `served_feedback` (the verdicts users gave on served answers and the `feedback` question "
    "set the server rebuilt from them) as a materialization when users said something new (no run is launched).",
)
def served_feedback_sensor(context: SensorEvaluationContext, settings: KohakuSettings) -> SensorResult | SkipReason:
    version = feedback_version(settings.lake)
    if not version or version == context.cursor:
        return SkipReason("no new feedback since the last tick")
    metadata = feedback_metadata(settings, feedback_set_path(settings.lake))
    context.log.info(f"recorded {metadata['verdicts']} verdict(s), {metadata['waiting_for_review']} waiting for review")
    return SensorResult(asset_events=[AssetMaterialization(asset_key=FEEDBACK, metadata=metadata)], cursor=version)


def reviewed_version(path: Path) -> str:
    """What the reviewed rows of a question set say (ids and gold): a new or corrected
    review changes it, a verdict still waiting for review does not."""
    rows = [(q.id, q.question, q.answer_unit, q.gold) for q in load_questions(path)]
    return stable_hash([repr(r) for r in rows]) if rows else ""


@sensor(
    jobs=[answer_config_job],
    minimum_interval_seconds=300,
    default_status=DefaultSensorStatus.STOPPED,
    description='Runs the configs whose questions are the `feedback` set (`questions = "feedback"`) again when '
    "reviewed rows are added or changed after it was turned on, so their scores follow the questions users asked "
    "(stored work is reused: only the new questions reach the LLM). Off by default: it starts LLM runs.",
)
def feedback_backfill_sensor(context: SensorEvaluationContext, settings: KohakuSettings) -> SensorResult | SkipReason:
    path = feedback_set_path(settings.lake)
    version = reviewed_version(path) if path.exists() else ""
    started = context.last_sensor_start_time
    seen = json.loads(context.cursor) if context.cursor and context.cursor.startswith("{") else None
    # Turned on (again): what is reviewed now is recorded, not run. Running it would re-run
    # configs that already answered it, or that failed and are unchanged; the
    # reviews added or changed from now on are what the sensor is for.
    if seen is None or seen.get("started") != started:
        cursor = json.dumps({"reviewed": version, "started": started})
        return SensorResult(
            cursor=cursor,
            skip_reason="turned on: the reviewed feedback questions as they are now recorded, not run "
            "(reviews added or changed from now on run the feedback configs)",
        )
    cursor = json.dumps({"reviewed": version, "started": started})
    if not version or version == seen.get("reviewed"):
        return SkipReason("no newly reviewed feedback questions")
    names = []
    for name, file in sorted(config_files(configs_dir(settings.lake)).items()):
        try:
            if Path(load_qa_config(file).questions) == path.resolve():
                names.append(name)
        except (ValueError, OSError):
            continue  # a broken config is reported by configs_sensor
    context.log.info(f"reviewed feedback changed: running {', '.join(names) or 'no config'}")
    job = answer_config_job.name
    runs = [RunRequest(run_key=f"{n}:feedback:{version}", partition_key=n, job_name=job) for n in names]
    return SensorResult(run_requests=runs, cursor=cursor)


SENSORS = [
    corpus_sensor,
    configs_sensor,
    ensemble_specs_sensor,
    sweeps_sensor,
    served_answers_sensor,
    served_feedback_sensor,
    feedback_backfill_sensor,
]
