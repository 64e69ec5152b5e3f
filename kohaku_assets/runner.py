"""In-process runs of the assets on the lake's persistent Dagster instance (the CLI, tests).

`kohaku index` runs one run per changed document (so one broken file fails only its own
run), then the index assembly; `kohaku eval` runs a config's partition, or an ensemble
spec's. They are the same assets the UI, sensors and schedule launch, so every run shows
in `kohaku ui`.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagster import (
    AssetsDefinition,
    DagsterEventType,
    DagsterInstance,
    DagsterRunStatus,
    ExecuteInProcessResult,
    RunsFilter,
    materialize,
)

from kohaku_assets.assets import INDEXES, PER_CONFIG, PER_DOCUMENT, QA_ASSETS, cross_ensemble, leaderboard
from kohaku_assets.assets.indexes import bm25_index, vector_index
from kohaku_assets.partitions import CONFIGS, DOCUMENTS, ENSEMBLE_SPECS
from kohaku_assets.resources import KohakuSettings
from kohaku_rag.answering import store as st
from kohaku_rag.answering.config_folder import config_files, config_of, configs_dir, spec_of
from kohaku_rag.answering.qa_config import QAConfig, dump_toml
from kohaku_rag.embed.base import Embedder
from kohaku_rag.errors import KohakuError
from kohaku_rag.indexing import steps as ix
from kohaku_rag.indexing.assembly import indexes_behind
from kohaku_rag.indexing.corpus import scan_corpus
from kohaku_rag.indexing.index_config import IndexConfig, record_index_config, recorded_index_config
from kohaku_rag.lake import Lake, write_bytes_atomic
from kohaku_rag.models import ModelPool
from kohaku_rag.retrieval.retriever import open_vector_store
from kohaku_rag.tree import NodeKind

# The CLI prints its own progress (one line per failure); Dagster's console lines, its
# failure tracebacks included, would drown it. The event log keeps every traceback.
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
# The models loaded by this process's runs, unless a caller brings its own pool.
PROCESS_MODELS = ModelPool()


# The instance's settings. Run monitoring lets `kohaku ui`'s daemon fail runs whose worker
# died (a kill -9, an OOM) instead of showing them STARTED forever; runs of `kohaku index`
# (in-process, no run worker to watch) are failed by `fail_orphaned_runs` instead.
INSTANCE_YAML = """telemetry:
  enabled: false
run_monitoring:
  enabled: true
  start_timeout_seconds: 180
  max_resume_run_attempts: 0
  poll_interval_seconds: 60
"""
# What earlier versions wrote; replaced by INSTANCE_YAML (a file edited by hand is kept).
_OLD_INSTANCE_YAML = "telemetry:\n  enabled: false\n"
# Tags naming the process that runs a CLI run, so a later run can tell it died.
PID_TAG, HOST_TAG = "kohaku/pid", "kohaku/host"


def instance_for(lake_root: Path) -> DagsterInstance:
    """The lake's own persistent Dagster instance, so `kohaku ui` shows these runs."""
    home = Lake(Path(lake_root)).dagster_home
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists() or config.read_text(encoding="utf-8") in ("", _OLD_INSTANCE_YAML):
        write_bytes_atomic(config, INSTANCE_YAML.encode())
    # Dagster's own code (and `kohaku ui`) read the instance from DAGSTER_HOME.
    os.environ["DAGSTER_HOME"] = str(home)
    instance = DagsterInstance.from_config(str(home))
    lake = Lake(Path(lake_root))
    if not configs_dir(lake).exists():  # a new lake (or one that never had configs)
        register_default_config(lake, instance)
    return instance


def register_default_config(lake: Lake, instance: DagsterInstance) -> None:
    """A new lake answers out of the box: `CONFIGS/default.toml` written from the defaults
    (a user's file is kept) and its `default` partition registered. Only once: a user who
    deletes `default.toml` later does not see it come back."""
    folder = configs_dir(lake)
    if "default" not in config_files(folder):
        write_bytes_atomic(folder / "default.toml", dump_toml(QAConfig()).encode())
    if not instance.has_dynamic_partition(CONFIGS, "default"):
        instance.add_dynamic_partitions(CONFIGS, ["default"])


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def fail_orphaned_runs(instance: DagsterInstance) -> list[str]:
    """Mark runs of this host's CLI left STARTED by a process that is gone (kill -9, OOM,
    power cut) as failed, so the UI tells the truth; returns their run ids. Runs launched
    by the UI's daemon are watched by its run monitoring instead."""
    active = [DagsterRunStatus.STARTED, DagsterRunStatus.STARTING, DagsterRunStatus.NOT_STARTED]
    host = socket.gethostname()
    failed: list[str] = []
    for run in instance.get_runs(filters=RunsFilter(statuses=active, tags={HOST_TAG: host})):
        pid = run.tags.get(PID_TAG, "")
        if pid.isdigit() and int(pid) != os.getpid() and not _process_alive(int(pid)):
            instance.report_run_failed(run, f"the process running it (pid {pid}) ended without finishing it")
            failed.append(run.run_id)
    return failed


def failure_message(result: ExecuteInProcessResult, *, verbose: bool = False) -> str:
    """One line: the failed step and why (DocumentError names the file); with `verbose`,
    the traceback follows."""
    for event in result.all_events:
        if event.event_type is DagsterEventType.STEP_FAILURE:
            error = event.event_specific_data.error  # type: ignore[union-attr]
            cause = error.cause if error is not None and error.cause is not None else error
            message = " ".join(cause.message.split()) if cause else "failed"
            if cause is not None and cause.cls_name == "Failure":  # raised on purpose: its text is the reason
                message = message.split(": ", 1)[-1] if message.startswith("dagster.") else message
            line = f"{event.step_key}: {message}"
            if verbose and error is not None:
                line += "\n" + error.to_string()
            return line
    return "run failed"


def materialization_metadata(result: ExecuteInProcessResult) -> dict[str, dict[str, object]]:
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


def _run(
    settings: KohakuSettings,
    models: ModelPool,
    assets: Sequence[AssetsDefinition],
    selection: Sequence[AssetsDefinition],
    partition_key: str | None = None,
) -> ExecuteInProcessResult:
    return materialize(
        list(assets),
        selection=list(selection),
        partition_key=partition_key,
        instance=instance_for(settings.lake.root),
        resources=resources_for(settings, models),
        raise_on_error=False,
        tags={"kohaku/trigger": "cli", PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()},
        run_config=QUIET,
    )


def _register(settings: KohakuSettings, partitions_name: str, keys: Sequence[str]) -> None:
    instance = instance_for(settings.lake.root)
    new = [k for k in keys if not instance.has_dynamic_partition(partitions_name, k)]
    if new:
        instance.add_dynamic_partitions(partitions_name, new)


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
    plan = ix.plan_index(scan, lake, cfg, registered, retry_failed=retry_failed)
    for doc_id, why in plan.held.items():
        progress(f"not retrying {doc_id}, it failed before ({why}); kohaku index --retry-failed retries it")
    _register(settings, DOCUMENTS, sorted(set(scan.documents) | set(scan.missing)))
    for doc_id in plan.remove:
        if doc_id in registered:
            instance.delete_dynamic_partition(DOCUMENTS, doc_id)
        ix.remove_document(lake, doc_id)
        progress(f"removed {doc_id}")
    # Listed in metadata.csv with a URL but absent locally: the source asset fetches them.
    build = sorted(set(plan.build) | set(plan.fetch))
    report = IndexReport(skipped=plan.unchanged, removed=plan.remove)
    every = [*PER_DOCUMENT, *INDEXES]
    for n, doc_id in enumerate(build, start=1):
        t0 = time.perf_counter()
        result = _run(settings, models, every, PER_DOCUMENT, doc_id)
        if result.success:
            report.recomputed.append(doc_id)
            progress(f"[{n}/{len(build)}] indexed {doc_id} in {time.perf_counter() - t0:.1f}s")
        else:
            report.failed[doc_id] = failure_message(result)
            detail = failure_message(result, verbose=True) if verbose else report.failed[doc_id]
            progress(f"[{n}/{len(build)}] FAILED {doc_id}: {detail}")
    # Compare, don't assume: an earlier run may have died after its documents but before
    # (or during) assembly, leaving indexes that no document run would ever re-assemble.
    lag = indexes_behind(lake, sorted(set(scan.documents) | set(scan.missing)))
    stale = [a for a, docs in ((vector_index, lag.vectors), (bm25_index, lag.bm25)) if docs]
    if stale:
        result = _run(settings, models, every, stale)
        if not result.success:
            raise RuntimeError(f"index assembly failed: {failure_message(result, verbose=verbose)}")
    report.failed.update(plan.held)
    report.held = sorted(plan.held)
    report.documents = len(plan.unchanged) + len(report.recomputed)
    report.nodes = node_counts(settings, models)
    report.seconds = time.perf_counter() - started
    return report


def node_counts(settings: KohakuSettings, models: ModelPool = PROCESS_MODELS) -> dict[str, int]:
    lake = settings.lake
    if not lake.vectors_path.exists():
        return {}
    with open_vector_store(lake, embedder_for(settings, models)) as store:
        return {str(kind): store.count(kind) for kind in NodeKind}


# ── answering ─────────────────────────────────────────────────────────────


class RunFailed(KohakuError, RuntimeError):
    """A config's (or ensemble's) materialization failed; the message is the failed step's
    one line, e.g. "predictions: 2 of 40 questions failed: ...; re-run to retry them"."""


@dataclass(frozen=True)
class QAReport:
    config: str
    keys: st.QAKeys
    metadata: dict[str, dict[str, object]]  # asset name -> its materialization metadata
    seconds: float


def _leaderboard(settings: KohakuSettings, models: ModelPool) -> None:
    board = _run(settings, models, [*QA_ASSETS, cross_ensemble], [leaderboard])
    if not board.success:
        raise RuntimeError(f"leaderboard: {failure_message(board)}")


def run_config(
    settings: KohakuSettings, name: str, *, leaderboard_too: bool = True, models: ModelPool = PROCESS_MODELS
) -> QAReport:
    """Materialize one config's partition (what is stored is reused) and the leaderboard."""
    started = time.perf_counter()
    cfg = config_of(settings.lake, name)
    _register(settings, CONFIGS, [name])
    result = _run(settings, models, QA_ASSETS, PER_CONFIG, name)
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
    _register(settings, ENSEMBLE_SPECS, [name])
    result = _run(settings, models, [*QA_ASSETS, cross_ensemble], [cross_ensemble], name)
    if not result.success:
        raise RunFailed(f"ensemble {name}: {failure_message(result)}")
    _leaderboard(settings, models)
    return materialization_metadata(result)["cross_ensemble"]
