"""Run the indexing assets through Dagster on the lake's persistent instance.

`kohaku index` uses this directly (runs execute in-process, one run per changed
document so one broken file fails only its own run); the sensor and schedule in
`definitions` use `plan_index` to request the same runs from the daemon.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from dagster import DagsterEventType, DagsterInstance, ExecuteInProcessResult, materialize

from kohaku_assets.assets import INDEXES, PER_DOCUMENT
from kohaku_assets.partitions import documents
from kohaku_assets.settings import KohakuSettings
from kohaku_rag import indexing as ix
from kohaku_rag.corpus import scan_corpus
from kohaku_rag.search import open_vector_store
from kohaku_rag.tree import NodeKind


# The CLI prints its own progress; Dagster's per-event DEBUG lines would drown it.
QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def instance_for(lake_root: Path) -> DagsterInstance:
    """The lake's own persistent Dagster instance, so `kohaku ui` shows these runs."""
    home = lake_root / ".dagster"
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text("telemetry:\n  enabled: false\n")
    os.environ["DAGSTER_HOME"] = str(home)
    return DagsterInstance.from_config(str(home))


def failure_message(result: ExecuteInProcessResult) -> str:
    for event in result.all_events:
        if event.event_type is DagsterEventType.STEP_FAILURE:
            error = event.event_specific_data.error  # type: ignore[union-attr]
            cause = error.cause if error is not None and error.cause is not None else error
            return f"{event.step_key}: {cause.message.strip() if cause else 'failed'}"
    return "run failed"


@dataclass
class IndexReport:
    documents: int = 0
    recomputed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
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
            "recomputed_partitions": self.recomputed,
            "skipped_partitions": self.skipped,
            "seconds": round(self.seconds, 2),
        }


def run_index(settings: KohakuSettings, *, progress: Callable[[str], None] = print) -> IndexReport:
    started = time.perf_counter()
    lake = settings.lake
    instance = instance_for(lake.root)
    scan = scan_corpus(settings.corpus, lake.sources_dir)
    for name, why in scan.skipped.items():
        progress(f"skipping {name}: {why}")
    registered = set(instance.get_dynamic_partitions(documents.name))
    plan = ix.plan_index(scan, lake, settings.index_config(), registered)
    wanted = sorted(set(scan.documents) | set(scan.missing))
    new = [d for d in wanted if d not in registered]
    if new:
        instance.add_dynamic_partitions(documents.name, new)
    for doc_id in plan.remove:
        if doc_id in registered:
            instance.delete_dynamic_partition(documents.name, doc_id)
        ix.remove_document(lake, doc_id)
        progress(f"removed {doc_id}")
    # Listed in metadata.csv with a URL but absent locally: the source asset fetches them.
    build = sorted(set(plan.build) | set(plan.fetch))
    report = IndexReport(skipped=plan.unchanged, removed=plan.remove)
    resources = {"settings": settings}
    every = [*PER_DOCUMENT, *INDEXES]
    for n, doc_id in enumerate(build, start=1):
        t0 = time.perf_counter()
        result = materialize(every, selection=PER_DOCUMENT, partition_key=doc_id, instance=instance,
                             resources=resources, raise_on_error=False, tags={"kohaku/trigger": "cli"}, run_config=QUIET)
        if result.success:
            report.recomputed.append(doc_id)
            progress(f"[{n}/{len(build)}] indexed {doc_id} in {time.perf_counter() - t0:.1f}s")
        else:
            report.failed[doc_id] = failure_message(result)
            progress(f"[{n}/{len(build)}] FAILED {doc_id}: {report.failed[doc_id]}")
    if build or plan.remove or not lake.vectors_path.exists() or not lake.bm25_path.exists():
        result = materialize(every, selection=INDEXES, instance=instance, resources=resources,
                             raise_on_error=False, tags={"kohaku/trigger": "cli"}, run_config=QUIET)
        if not result.success:
            raise RuntimeError(f"index assembly failed: {failure_message(result)}")
    report.documents = len(plan.unchanged) + len(report.recomputed)
    report.nodes = node_counts(settings)
    report.seconds = time.perf_counter() - started
    return report


def node_counts(settings: KohakuSettings) -> dict[str, int]:
    if not settings.lake.vectors_path.exists():
        return {}
    with open_vector_store(settings.lake, settings.embedder()) as store:
        return {str(kind): store.count(kind) for kind in NodeKind}
