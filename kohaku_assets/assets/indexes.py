"""The two indexes, assembled from every registered document's index rows.

They re-assemble by their automation condition after document runs finish, whoever
started them (sensor, schedule, a backfill in the UI), and `kohaku index` materializes
them after its document runs.
"""

import time

from dagster import (
    AssetCheckResult,
    AssetCheckSpec,
    AssetExecutionContext,
    AutomationCondition,
    MaterializeResult,
    MetadataValue,
    ResourceParam,
    asset,
)

from kohaku_assets.assets.documents import index_rows
from kohaku_assets.partitions import INDEXING_GROUP, documents
from kohaku_assets.resources import KohakuSettings
from kohaku_rag.indexing import assembly
from kohaku_rag.indexing import steps as ix
from kohaku_rag.indexing.index_config import record_index_config
from kohaku_rag.models import ModelPool
from kohaku_rag.retrieval.retriever import open_vector_store

# Wait while any document is still in progress.
ASSEMBLE_WHEN = (
    AutomationCondition.any_deps_updated().since_last_handled()
    & ~AutomationCondition.any_deps_in_progress()
    & ~AutomationCondition.in_progress()
)


def _registered(context: AssetExecutionContext) -> list[str]:
    return sorted(context.instance.get_dynamic_partitions(documents.name))


def _documents_table(rows: list[tuple[str, int, str]]) -> str:
    """Nodes per document as a table with a text bar, so outliers (an empty parse, a
    runaway one) stand out in the UI."""
    top = max((n for _, n, _ in rows), default=1) or 1
    lines = ["| document | nodes | | updated |", "|---|---:|---|---|"]
    lines += [f"| {d} | {n} | {'█' * max(1, round(20 * n / top))} | {u} |" for d, n, u in rows]
    return "\n".join(lines)


@asset(
    group_name=INDEXING_GROUP,
    deps=[index_rows],
    code_version="1",
    automation_condition=ASSEMBLE_WHEN,
    description="sqlite-vec index of sentence and paragraph vectors plus every node's text; upserted per document.",
    check_specs=[AssetCheckSpec("index_dims_agree", asset="vector_index")],
)
def vector_index(
    context: AssetExecutionContext, settings: KohakuSettings, models: ResourceParam[ModelPool]
) -> MaterializeResult:
    started = time.perf_counter()
    lake, cfg = settings.lake, settings.index_config()
    record_index_config(lake, cfg)  # a lake first built from the UI records its settings here
    embedder = models.embedder(cfg.embedder, lake)
    registered = _registered(context)
    stats = assembly.assemble_vector_index(lake, registered, embedder.dim, embedder.model_id)
    with open_vector_store(lake, embedder) as store:
        counts = {kind: store.count(kind) for kind in ("sentence", "paragraph")}
        per_doc = [(d.doc_id, d.n_nodes, d.updated_at[:19]) for d in store.documents()]
    # Every document's stored vectors must have the dimension the index is queried with.
    dims = {d: ix.stored_dim(lake, d) for d in registered}
    wrong = {d: n for d, n in dims.items() if n is not None and n != embedder.dim}
    return MaterializeResult(
        metadata={
            "documents": stats.documents,
            "upserted": len(stats.upserted),
            "deleted": MetadataValue.json(stats.deleted),
            "unchanged": stats.unchanged,
            **{f"vectors/{k}": v for k, v in counts.items()},
            "seconds": round(time.perf_counter() - started, 3),
            "path": MetadataValue.path(str(lake.vectors_path)),
            "per_document": MetadataValue.md(_documents_table(per_doc)),
        },
        check_results=[
            AssetCheckResult(
                check_name="index_dims_agree",
                passed=not wrong,
                metadata={"dim": embedder.dim, "mismatched": MetadataValue.json(wrong)},
            )
        ],
    )


@asset(
    group_name=INDEXING_GROUP,
    deps=[index_rows],
    code_version="1",
    automation_condition=ASSEMBLE_WHEN,
    description="BM25 over paragraph texts (with titles).",
)
def bm25_index(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    started = time.perf_counter()
    stats = assembly.assemble_bm25(settings.lake, _registered(context))
    return MaterializeResult(
        metadata={
            "paragraphs": stats.paragraphs,
            "tokenized_documents": len(stats.tokenized),
            "seconds": round(time.perf_counter() - started, 3),
            "path": MetadataValue.path(str(settings.lake.bm25_path)),
        }
    )


INDEXES = [vector_index, bm25_index]
