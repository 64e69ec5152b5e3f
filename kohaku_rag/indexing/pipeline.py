"""Indexing a corpus without Dagster: the same steps the per-document assets run, in order.

`index_corpus` is what `kohaku_rag.index()` calls (a notebook, a script). It writes the
same lake as the Dagster assets and skips what is up to date the same way, but registers
no Dagster partitions: to see the documents in the UI, index with `kohaku index`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kohaku_rag.errors import DamagedRows, KohakuError
from kohaku_rag.indexing import assembly, search_aids
from kohaku_rag.indexing import steps as ix
from kohaku_rag.indexing.captions import VisionLLMCaptioner
from kohaku_rag.indexing.corpus import check_corpus_folder, resolve_source, scan_corpus
from kohaku_rag.indexing.failures import clear_failure, is_document_fault, one_line, remember
from kohaku_rag.indexing.index_config import IndexConfig, record_index_config, recorded_index_config
from kohaku_rag.indexing.index_models import IndexModels
from kohaku_rag.indexing.index_plan import plan_index
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.lock import hold_lake

Progress = Callable[[str], None]


@dataclass(frozen=True)
class IndexSummary:
    documents: int
    recomputed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # doc id -> reason
    seconds: float = 0.0


def index_document(
    lake: Lake, corpus: Path, doc_id: str, cfg: IndexConfig, models: IndexModels, *, follow_links: bool = False
) -> None:
    """source → tree → captions → leaf vectors → node vectors → index rows of one document."""
    source = resolve_source(corpus, lake.sources_dir, doc_id, cfg.download_policy, follow_links=follow_links)
    ix.write_source(lake, source)
    nodes, _ = ix.build_document_tree(lake, source, cfg)
    captioner = models.captioner(cfg)
    try:
        ix.caption_figures(
            lake,
            doc_id,
            nodes,
            captioner,
            ix.captions_version(source.content_hash, cfg, ix.repaired_of(lake, doc_id, cfg)),
        )
    finally:
        if isinstance(captioner, VisionLLMCaptioner):
            captioner.close()
    ix.embed_document(lake, doc_id, cfg, models.embedder(cfg.embedder, lake))
    ix.propagate_document(lake, doc_id, cfg)
    ix.write_index_rows(lake, doc_id, cfg)


def index_corpus(
    corpus: Path,
    lake: Lake,
    cfg: IndexConfig | None = None,
    *,
    models: IndexModels | None = None,
    progress: Progress = lambda _m: None,
    retry_failed: bool = False,
    follow_links: bool = False,
) -> IndexSummary:
    """Index new and changed documents, drop removed ones, and re-assemble whichever index
    differs from the per-document tables. A document that fails is reported by id with its
    reason and not tried again until it changes (or `retry_failed`); the rest index."""
    check_corpus_folder(corpus)  # before the lake (and its lock file) is created
    with hold_lake(lake.root, "kohaku_rag.index", say=progress):
        return _index_corpus(corpus, lake, cfg, models or IndexModels(), progress, retry_failed, follow_links)


def _assemble(
    lake: Lake, corpus: Path, keep: list[str], cfg: IndexConfig, models: IndexModels, progress: Progress
) -> None:
    # Not "if something was built": an earlier run may have died mid-assembly.
    lag = assembly.indexes_behind(lake, keep, corpus, verify=True)
    for line in lag.problems():
        progress(line)
    if lag.vectors:
        embedder = models.embedder(cfg.embedder, lake)
        stats = assembly.assemble_vector_index(lake, keep, embedder.dim, embedder.model_id)
        if stats.rebuilt and not lag.problems():
            progress(f"rebuilt the vector index from the stored rows of {stats.documents} documents: {stats.rebuilt}")
    if lag.bm25:
        assembly.assemble_bm25(lake, keep)
    if lag.aids:
        search_aids.assemble_search_aids(lake, keep, corpus)


def _index_corpus(
    corpus: Path,
    lake: Lake,
    cfg: IndexConfig | None,
    models: IndexModels,
    progress: Progress,
    retry_failed: bool,
    follow_links: bool,
) -> IndexSummary:
    started = time.perf_counter()
    cfg = cfg or recorded_index_config(lake) or IndexConfig()
    record_index_config(lake, cfg)
    scan = scan_corpus(corpus, lake.sources_dir, follow_links=follow_links)
    for name, why in scan.skipped.items():
        progress(f"skipping {name}: {why}")
    for warning in scan.warnings:
        progress(warning)
    plan = plan_index(scan, lake, cfg, retry_failed=retry_failed)
    for doc_id, why in plan.held.items():
        progress(f"not retrying {doc_id} (failed before: {why}); retry_failed=True retries it")
    for doc_id, why in plan.unreadable.items():
        progress(f"recomputing {doc_id}: its stored table {why}")
    for doc_id in plan.remove:
        ix.remove_document(lake, doc_id)
        progress(f"removed {doc_id}")
    build = sorted(set(plan.build) | set(plan.fetch))
    done: list[str] = []
    failed: dict[str, str] = {}
    for n, doc_id in enumerate(build, start=1):
        t0 = time.perf_counter()
        try:
            index_document(lake, corpus, doc_id, cfg, models, follow_links=follow_links)
        except (KohakuError, OSError, ValueError, RecursionError) as exc:
            failed[doc_id] = one_line(exc)
            if is_document_fault(exc):
                repaired = ix.repaired_of(lake, doc_id, cfg)
                remember(lake, corpus, doc_id, lambda h: ix.embeddings_version(h, cfg, repaired), failed[doc_id])  # noqa: B023 -- called here
            progress(f"[{n}/{len(build)}] FAILED {doc_id}: {failed[doc_id]}")
            continue
        clear_failure(lake, doc_id)
        done.append(doc_id)
        progress(f"[{n}/{len(build)}] indexed {doc_id} in {time.perf_counter() - t0:.1f}s")
    keep = sorted(set(scan.documents) | set(scan.missing))
    for _attempt in range(len(keep) + 1):
        try:
            _assemble(lake, corpus, keep, cfg, models, progress)
            break
        except DamagedRows as exc:  # its rows set aside: recomputed from the corpus, then assembled again
            progress(f"recomputing {exc.doc_id}: {one_line(exc)}")
            index_document(lake, corpus, exc.doc_id, cfg, models, follow_links=follow_links)
    failed.update(plan.held)
    return IndexSummary(
        len(plan.unchanged) + len(done), done, plan.unchanged, plan.remove, failed, time.perf_counter() - started
    )
