"""In-process runs of the code location's jobs on the lake's persistent Dagster instance
(the CLI, tests).

`kohaku index` runs `index_document` once per changed document (so one broken file fails
only its own run), then `assemble_indexes`; `kohaku eval` runs `answer_config` for a
config's partition (or `vote_ensemble` for an ensemble spec's), then `update_leaderboard`.
They are the jobs the UI, sensors and schedule launch, resolved from the same
`Definitions`, and each run carries the code location's origin (the location named in
`workspace.yaml`), so in `kohaku ui` a CLI run is listed under its job, with its
partition, like a run launched there.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import socket
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from dagster import (
    AssetKey,
    DagsterEventType,
    JobDefinition,
    ResourceDefinition,
    in_process_executor,
)

from kohaku_assets import cluster
from kohaku_assets.dagster_private import (
    CodeLocationOrigin,
    ExecutionResult,
    InMemoryJob,
    ReconstructableRepository,
    RegisteredCodeLocationOrigin,
    RemoteRepositoryOrigin,
    create_execution_plan,
    execute_run,
    location_origins_from_yaml_paths,
    merge_run_tags,
)
from kohaku_assets.definitions import defs
from kohaku_assets.instance import HOST_TAG, PID_TAG, fail_orphaned_runs, instance_for
from kohaku_assets.jobs import (
    answer_config_job,
    assemble_indexes_job,
    cross_ensemble_job,
    index_document_job,
    leaderboard_job,
    repair_tables_job,
)
from kohaku_assets.partitions import CONFIGS, DOCUMENTS, ENSEMBLE_SPECS
from kohaku_assets.resources import PROCESS_MODELS, REPO_ROOT, KohakuSettings
from kohaku_rag.answering import qa_tables as st
from kohaku_rag.answering.config_folder import config_of, spec_of
from kohaku_rag.document.tree import NodeKind
from kohaku_rag.embed.base import Embedder
from kohaku_rag.errors import KohakuError
from kohaku_rag.indexing import steps as ix
from kohaku_rag.indexing.assembly import indexes_behind
from kohaku_rag.indexing.corpus import CorpusScan, scan_corpus
from kohaku_rag.indexing.index_config import IndexConfig, record_index_config, recorded_index_config
from kohaku_rag.indexing.index_plan import plan_index
from kohaku_rag.indexing.prefetch import prefetch
from kohaku_rag.lake.lock import LOCK_TOKEN_TAG, held_token, hold_lake
from kohaku_rag.model_pool import ModelPool
from kohaku_rag.progress import format_eta
from kohaku_rag.retrieval.retriever import open_vector_store

# The CLI prints its own progress (one line per failure); Dagster's console lines, its
# failure tracebacks included, would drown it. The event log keeps every traceback.
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
# The workspace `kohaku ui` loads; its one code location is the one CLI runs belong to.
WORKSPACE_YAML = REPO_ROOT / "workspace.yaml"
LOCATION_NAME = "kohaku-lake"


def failure_message(result: ExecutionResult, *, verbose: bool = False) -> str:
    """One line: the failed step and why (DocumentError names the file); with `verbose`,
    the traceback follows."""
    for event in result.all_events:
        if event.event_type is DagsterEventType.STEP_FAILURE:
            error = event.event_specific_data.error  # type: ignore[union-attr]
            cause = error.cause if error is not None and error.cause is not None else error
            message = " ".join(cause.message.split()) if cause else "failed"
            if cause is not None and cause.cls_name == "Failure":  # raised on purpose: its text is the reason
                message = message.split(": ", 1)[-1] if message.startswith("dagster.") else message
            elif message.startswith("kohaku_rag.errors."):  # ours: the message names the file and the fix
                message = message.split(": ", 1)[-1]
            line = f"{event.step_key}: {message}"
            if verbose and error is not None:
                line += "\n" + error.to_string()
            return line
    return "run failed"


def materialization_metadata(result: ExecutionResult) -> dict[str, dict[str, object]]:
    """asset name -> the metadata of its materialization in `result`."""
    out: dict[str, dict[str, object]] = {}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization  # type: ignore[union-attr]
        out[mat.asset_key.to_user_string()] = {k: v.value for k, v in mat.metadata.items()}
    return out


def resources_for(settings: KohakuSettings, models: ModelPool = PROCESS_MODELS) -> dict[str, Any]:
    """The resources a run (or a sensor evaluated in-process) gets."""
    return {"settings": settings, "models": models}


def embedder_for(settings: KohakuSettings, models: ModelPool = PROCESS_MODELS) -> Embedder:
    """The embedder of the lake's index settings."""
    return models.embedder(settings.index_config().embedder, settings.lake)


@functools.cache
def code_location_origin() -> CodeLocationOrigin:
    """The origin of the code location `kohaku ui` loads from `workspace.yaml`, so runs made
    here are filed under the same location, repository and job as runs launched there."""
    origins = location_origins_from_yaml_paths([str(WORKSPACE_YAML)]) if WORKSPACE_YAML.exists() else []
    named = [o for o in origins if o.location_name == LOCATION_NAME]
    return named[0] if named else RegisteredCodeLocationOrigin(LOCATION_NAME)


def repository_origin() -> RemoteRepositoryOrigin:
    return RemoteRepositoryOrigin(code_location_origin(), defs.get_repository_def().name)


def settings_config(settings: KohakuSettings) -> dict[str, Any]:
    """The `settings` resource as run config: what the run's page in the UI shows, and what a
    re-execution from the UI runs with."""
    return {"config": settings.model_dump(include={"lake_root", "corpus_dir", "index_config_file", "follow_links"})}


def job_for(name: str, models: ModelPool = PROCESS_MODELS) -> JobDefinition:
    """The code location's job `name`, run in this process (every step in it, whatever
    executor the UI's runs use), with `models` as its loaded models."""
    return _in_this_process(defs.resolve_job_def(name), models)


def _in_this_process(job: JobDefinition, models: ModelPool) -> JobDefinition:
    """`job` with every step in this process and `models` as its loaded models. The process's
    own pool is already the location's `models` resource; another pool (a test's) replaces it
    on the job, which a job subset would refuse as conflicting with the assets' resource."""
    if models is not PROCESS_MODELS:
        resources = {**job.resource_defs, "models": ResourceDefinition.hardcoded_resource(models)}
        job = job.with_top_level_resources(resources)
    return job.with_executor_def(in_process_executor)


# The tag the UI's Runs page reads for its "Launched by" column (without it, every CLI run
# reads "Manually launched", telling nothing): the command that started the run.
LAUNCHED_BY_TAG = "user"
_COMMANDS = {
    "index_document": "kohaku index ({})",
    "assemble_indexes": "kohaku index",
    "answer_config": "kohaku eval --config {}",
    "vote_ensemble": "kohaku eval --config {}",
    "update_leaderboard": "kohaku eval (leaderboard)",
    "report_sweep": "kohaku sweep {}",
}


def cli_command(job: str, partition_key: str | None) -> str:
    """The command a CLI run of `job` (for `partition_key`) comes from, as a person types it."""
    return _COMMANDS.get(job, f"kohaku ({job})").format(partition_key or "").replace(" ()", "")


def run_job(
    settings: KohakuSettings,
    name: str,
    partition_key: str | None = None,
    *,
    models: ModelPool = PROCESS_MODELS,
    asset_selection: Sequence[AssetKey] | None = None,
) -> ExecutionResult:
    """One run of the code location's job `name` (for one partition), executed in this
    process and recorded on the lake's instance like a run launched from `kohaku ui`: same
    job name, partition, location and repository."""
    instance = instance_for(settings.lake.root)
    # On a cluster the steps run on Celery workers, which rebuild the job from the code
    # location (with their own loaded models), so the run executes the location's job as is.
    remote = cluster.distributed(name)
    job = defs.resolve_job_def(name) if remote else job_for(name, models)
    if asset_selection is not None:
        job = job.get_subset(asset_selection=set(asset_selection))
    run_config = {**QUIET, "resources": {"settings": settings_config(settings)}}
    tags = {
        "kohaku/trigger": "cli",
        LAUNCHED_BY_TAG: cli_command(name, partition_key),
        PID_TAG: str(os.getpid()),
        HOST_TAG: socket.gethostname(),
    }
    token = held_token(settings.lake.root)
    if token is not None:  # the run's steps (on this process or a worker) write under our lock
        tags[LOCK_TOKEN_TAG] = token
    tags = dict(merge_run_tags(job, partition_key, tags, asset_selection, instance, run_config))
    plan = create_execution_plan(job, run_config=run_config, instance_ref=instance.get_ref(), tags=tags)
    origin = repository_origin()
    code = ReconstructableRepository.for_module("kohaku_assets.definitions", "defs", None, sys.executable)
    run = instance.create_run_for_job(
        job_def=job,
        execution_plan=plan,
        run_config=run_config,
        tags=tags,
        asset_selection=frozenset(asset_selection) if asset_selection is not None else None,
        remote_job_origin=origin.get_job_origin(name),
        job_code_origin=code.get_reconstructable_job(name).get_python_origin(),
    )
    recon = code.get_reconstructable_job(name)
    if asset_selection is not None:
        recon = recon.get_subset(asset_selection=set(asset_selection))
    return execute_run(recon if remote else InMemoryJob(job), run, instance, raise_on_error=False)


def _register(settings: KohakuSettings, partitions_name: str, keys: Sequence[str]) -> None:
    instance = instance_for(settings.lake.root)
    # One listing, not a query per key: at 100,000 documents that is 0.2 s instead of 270 s
    # (bench/indexing/scale.py partitions).
    known = set(instance.get_dynamic_partitions(partitions_name))
    new = [k for k in keys if k not in known]
    if new:
        instance.add_dynamic_partitions(partitions_name, new)


class RunFailed(KohakuError, RuntimeError):
    """A run failed (a config's, an ensemble's, the index assembly); the message is the
    failed step's one line, e.g. "predictions: 2 of 40 questions failed: ...; re-run to retry them"."""


# ── indexing ──────────────────────────────────────────────────────────────


@dataclass
class IndexReport:
    documents: int = 0
    recomputed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # this run's failures and `held` ones
    held: list[str] = field(default_factory=list)  # failed before in this very version: not retried
    nodes: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "documents": self.documents,
            "nodes": self.nodes,
            "recomputed": len(self.recomputed),
            "skipped": len(self.skipped),
            "removed": len(self.removed),
            "failed": self.failed,
            "not_retried": self.held,
            "recomputed_partitions": self.recomputed,
            "skipped_partitions": self.skipped,
            "seconds": round(self.seconds, 2),
        }


def run_index(
    settings: KohakuSettings,
    *,
    progress: Callable[[str], None] = print,
    models: ModelPool = PROCESS_MODELS,
    retry_failed: bool = False,
    verbose: bool = False,
    wait: bool = True,
) -> IndexReport:
    """Index what changed, holding the lake's writer lock (`wait=False`: `LakeBusy` at once
    when another process writes the lake)."""
    with hold_lake(settings.lake.root, "kohaku index", wait=wait, say=progress):
        return _run_index(settings, progress=progress, models=models, retry_failed=retry_failed, verbose=verbose)


def _run_index(
    settings: KohakuSettings,
    *,
    progress: Callable[[str], None],
    models: ModelPool,
    retry_failed: bool,
    verbose: bool,
    repair: bool = True,
) -> IndexReport:
    """Index what changed in the corpus. Index settings given by file become the lake's
    settings (what changed recomputes); without one, the lake's recorded settings hold.

    Whatever an earlier run left wrong is put right here: its runs left STARTED are marked
    failed, and an index that differs from the per-document tables (a run killed during
    assembly) is re-assembled. A document that failed is not retried until its content,
    the settings or the code change, or `retry_failed`."""
    started = time.perf_counter()
    lake = settings.lake
    requested, _ = settings.requested_index_config()
    cfg = requested or recorded_index_config(lake) or IndexConfig()
    record_index_config(lake, cfg)
    instance = instance_for(lake.root)
    for run_id in fail_orphaned_runs(instance):
        progress(f"marked run {run_id} failed: its process ended without finishing it")
    scan = scan_corpus(settings.corpus, lake.sources_dir, follow_links=settings.follow_links)
    for name, why in scan.skipped.items():
        progress(f"skipping {name}: {why}")
    for warning in scan.warnings:
        progress(warning)
    registered = set(instance.get_dynamic_partitions(DOCUMENTS))
    plan = plan_index(scan, lake, cfg, registered, retry_failed=retry_failed)
    for doc_id, why in plan.held.items():
        progress(f"not retrying {doc_id}, it failed before ({why}); kohaku index --retry-failed retries it")
    for doc_id, why in plan.unreadable.items():
        progress(f"recomputing {doc_id}: its stored table {why}")
    _register(settings, DOCUMENTS, sorted(set(scan.documents) | set(scan.missing)))
    for doc_id in plan.remove:
        if doc_id in registered:
            instance.delete_dynamic_partition(DOCUMENTS, doc_id)
        ix.remove_document(lake, doc_id)
        progress(f"removed {doc_id}")
    report = IndexReport(skipped=plan.unchanged, removed=plan.remove)
    # Listed in metadata.csv with a URL but absent locally: downloaded here, a few at once;
    # one that fails is reported and not indexed (the next run tries it again).
    fetch = {d: scan.missing[d] for d in plan.fetch if d in scan.missing}
    if fetch:
        fetched = prefetch(fetch, lake.sources_dir, cfg.download_policy, workers=cfg.download_concurrency,
                           progress=progress)  # fmt: skip
        for line in fetched.summary():
            progress(line)
        report.failed.update(fetched.failed)
    build = sorted((set(plan.build) | set(plan.fetch)) - set(report.failed))

    started = time.perf_counter()

    def record(n: int, doc_id: str, outcome: _DocOutcome) -> None:
        left = len(build) - n
        eta = f" (ETA {format_eta((time.perf_counter() - started) / n * left)})" if left else ""
        if outcome.error is None:
            report.recomputed.append(doc_id)
            progress(f"[{n}/{len(build)}] indexed {doc_id} in {outcome.seconds:.1f}s{eta}")
        else:
            report.failed[doc_id] = outcome.error
            progress(f"[{n}/{len(build)}] FAILED {doc_id}: {outcome.detail}{eta}")

    if cluster.parallel_runs() == 1:
        for n, doc_id in enumerate(build, start=1):
            record(n, doc_id, _index_document(settings, doc_id, models, verbose))
    else:
        # On a cluster several document runs at once, each orchestrated by its own process
        # (their steps execute on the workers). Not threads: Dagster reconfigures `logging`
        # at every run start, which deadlocks against another thread's run logging events.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(cluster.parallel_runs(), mp_context=context) as pool:
            futures = {pool.submit(_index_document_remote, settings.model_dump(), d, verbose): d for d in build}
            for n, done in enumerate(as_completed(futures), start=1):
                record(n, futures[done], done.result())
        report.recomputed.sort()
    # Compare, don't assume: an earlier run may have died after its documents but before
    # (or during) assembly, leaving indexes that no document run would ever re-assemble.
    lag = indexes_behind(lake, sorted(set(scan.documents) | set(scan.missing)), settings.corpus, verify=True)
    lags = (("vector_index", lag.vectors), ("bm25_index", lag.bm25), ("search_aids", lag.aids))
    stale = [AssetKey(a) for a, docs in lags if docs]
    for line in lag.problems():
        progress(line)
    if stale:
        # The whole job when all are behind (the run the UI would launch), else those behind.
        subset = None if len(stale) == len(lags) else stale
        result = run_job(settings, assemble_indexes_job.name, models=models, asset_selection=subset)
        # A record table found damaged while assembling is set aside (assembly.DamagedRows):
        # its document is recomputed from the corpus file and the indexes assembled again.
        gone = [d for d in plan.unchanged if not lake.table(ix.INDEX_ROWS, d).exists()]
        if not result.success and gone:
            progress(f"recomputing {', '.join(gone)} from the corpus: {failure_message(result, verbose=False)}")
            for n, doc_id in enumerate(gone, start=1):
                record(n, doc_id, _index_document(settings, doc_id, models, verbose))
            result = run_job(settings, assemble_indexes_job.name, models=models, asset_selection=subset)
        if not result.success:
            raise RunFailed(f"index assembly failed: {failure_message(result, verbose=verbose)}")
        rebuilt = materialization_metadata(result).get("vector_index", {}).get("rebuilt")
        if rebuilt and not lag.problems():
            progress(f"rebuilt the vector index from the lake's stored rows: {rebuilt}")
    report.failed.update(plan.held)
    report.held = sorted(plan.held)
    if repair and cfg.table_repair and _repair_tables(settings, cfg, scan, report, progress, models):
        # Search has worked since the assembly above; the repaired documents are rebuilt now.
        again = _run_index(
            settings, progress=progress, models=models, retry_failed=False, verbose=verbose, repair=False
        )
        report.recomputed = sorted(set(report.recomputed) | set(again.recomputed))
    report.documents = len(plan.unchanged) + len(report.recomputed)
    report.nodes = node_counts(settings, models)
    report.seconds = time.perf_counter() - started
    return report


def _repair_tables(
    settings: KohakuSettings,
    cfg: IndexConfig,
    scan: CorpusScan,
    report: IndexReport,
    progress: Callable[[str], None],
    models: ModelPool,
) -> bool:
    """Run the table repairs of every indexed text document (a document's known tables are
    not asked again); whether any document's accepted repairs changed."""
    lake = settings.lake
    docs = [d for d, s in scan.documents.items() if s.format != "pdf" and d not in report.failed]
    changed = []
    for n, doc_id in enumerate(sorted(docs), start=1):
        before = ix.repaired_of(lake, doc_id, cfg)
        result = run_job(settings, repair_tables_job.name, doc_id, models=models)
        if not result.success:
            progress(f"[{n}/{len(docs)}] tables of {doc_id} not repaired: {failure_message(result)}")
            continue
        if ix.repaired_of(lake, doc_id, cfg) != before:
            changed.append(doc_id)
        progress(f"[{n}/{len(docs)}] table repairs of {doc_id} checked")
    if changed:
        progress(f"tables repaired in {len(changed)} document(s); re-indexing them: {', '.join(changed)}")
    return bool(changed)


@dataclass(frozen=True)
class _DocOutcome:
    error: str | None  # None: indexed
    detail: str  # the error, with its traceback when verbose
    seconds: float


def _index_document(settings: KohakuSettings, doc_id: str, models: ModelPool, verbose: bool) -> _DocOutcome:
    t0 = time.perf_counter()
    result = run_job(settings, index_document_job.name, doc_id, models=models)
    if result.success:
        return _DocOutcome(None, "", time.perf_counter() - t0)
    error = failure_message(result)
    return _DocOutcome(error, failure_message(result, verbose=True) if verbose else error, time.perf_counter() - t0)


def _index_document_remote(settings: dict[str, Any], doc_id: str, verbose: bool) -> _DocOutcome:
    """One document's run orchestrated in a pool process (its steps run on the workers)."""
    return _index_document(KohakuSettings(**settings), doc_id, PROCESS_MODELS, verbose)


def node_counts(settings: KohakuSettings, models: ModelPool = PROCESS_MODELS) -> dict[str, int]:
    lake = settings.lake
    if not lake.vectors_path.exists():
        return {}
    with open_vector_store(lake, embedder_for(settings, models)) as store:
        return {str(kind): store.count(kind) for kind in NodeKind}


# ── answering ─────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class QAReport:
    config: str
    keys: st.QAKeys
    metadata: dict[str, dict[str, object]]  # asset name -> its materialization metadata
    seconds: float


def _leaderboard(settings: KohakuSettings, models: ModelPool) -> None:
    board = run_job(settings, leaderboard_job.name, models=models)
    if not board.success:
        raise RunFailed(f"leaderboard: {failure_message(board)}")


def run_config(
    settings: KohakuSettings,
    name: str,
    *,
    leaderboard_too: bool = True,
    models: ModelPool = PROCESS_MODELS,
    wait: bool = True,
    progress: Callable[[str], None] = print,
) -> QAReport:
    """Materialize one config's partition (what is stored is reused) and the leaderboard,
    holding the lake's writer lock: a re-index waits until the answers are stored."""
    with hold_lake(settings.lake.root, f"kohaku eval --config {name}", wait=wait, say=progress):
        return _run_config(settings, name, leaderboard_too=leaderboard_too, models=models)


def _run_config(settings: KohakuSettings, name: str, *, leaderboard_too: bool, models: ModelPool) -> QAReport:
    started = time.perf_counter()
    cfg = config_of(settings.lake, name)
    _register(settings, CONFIGS, [name])
    result = run_job(settings, answer_config_job.name, name, models=models)
    if not result.success:
        raise RunFailed(f"config {name}: {failure_message(result)}")
    if leaderboard_too:
        _leaderboard(settings, models)
    return QAReport(
        name, st.keys_for(settings.lake, cfg), materialization_metadata(result), time.perf_counter() - started
    )


def run_ensemble(settings: KohakuSettings, name: str, *, models: ModelPool = PROCESS_MODELS) -> dict[str, Any]:
    """Materialize one spec's partition (its members must be stored) and the leaderboard;
    returns the cross_ensemble materialization metadata."""
    spec_of(settings.lake, name)  # a clear error for a missing or broken spec, before Dagster
    with hold_lake(settings.lake.root, f"kohaku eval --config {name}"):
        return _run_ensemble(settings, name, models)


def _run_ensemble(settings: KohakuSettings, name: str, models: ModelPool) -> dict[str, Any]:
    _register(settings, ENSEMBLE_SPECS, [name])
    result = run_job(settings, cross_ensemble_job.name, name, models=models)
    if not result.success:
        raise RunFailed(f"ensemble {name}: {failure_message(result)}")
    _leaderboard(settings, models)
    return materialization_metadata(result)["cross_ensemble"]
