"""Indexing assets: per-document partitions from source to index rows, then the two indexes.

Asset functions stay thin: each calls one step of `kohaku_rag.indexing` and reports
metadata. The lake is written by the library (Parquet by partition, atomically), so the
assets declare their upstreams with `deps`.
"""


import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AutomationCondition,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    asset,
)

from kohaku_assets.partitions import INDEXING_GROUP, documents
from kohaku_assets.settings import KohakuSettings
from kohaku_rag import indexing as ix
from kohaku_rag.corpus import DocumentMeta, SourceDocument, fetch_document, file_hash, find_document
from kohaku_rag.errors import DocumentError
from kohaku_rag.search import open_vector_store
from kohaku_rag.tree import Attachment, Node, NodeKind

GROUP = INDEXING_GROUP


def _source(settings: KohakuSettings, doc_id: str) -> SourceDocument:
    lake = settings.lake
    found = find_document(settings.corpus, doc_id, lake.sources_dir)
    if isinstance(found, SourceDocument):
        return found
    if isinstance(found, DocumentMeta):
        path = fetch_document(found, lake.sources_dir)
        return SourceDocument(doc_id, path, "pdf" if path.suffix == ".pdf" else "text", file_hash(path, found), found)
    raise DocumentError(settings.corpus / doc_id, "is no longer in the corpus folder (and metadata.csv has no URL for it)")


def _recorded_source(settings: KohakuSettings, doc_id: str) -> SourceDocument:
    """The source as `source_document` recorded it, so later steps read the same bytes' hash."""
    row = ix.read_source(settings.lake, doc_id)
    meta = DocumentMeta(doc_id, row["title"] if row["title"] != doc_id else "", row["url"])
    return SourceDocument(doc_id, Path(row["path"]), row["format"], row["content_hash"], meta)


def _documents_table(rows: list[tuple[str, int, str]]) -> str:
    """Nodes per document as a table with a text bar, so outliers (an empty parse, a
    runaway one) stand out in the UI."""
    top = max((n for _, n, _ in rows), default=1) or 1
    lines = ["| document | nodes | | updated |", "|---|---:|---|---|"]
    lines += [f"| {d} | {n} | {'█' * max(1, round(20 * n / top))} | {u} |" for d, n, u in rows]
    return "\n".join(lines)


def _sample_table(nodes: list[Node], limit: int = 5) -> str:
    rows = ["| node_id | kind | page | text |", "|---|---|---|---|"]
    picks = [n for n in nodes if n.kind is NodeKind.PARAGRAPH][:limit]
    for n in picks:
        text = n.text[:160].replace("|", "\\|").replace("\n", " ")
        rows.append(f"| {n.node_id} | {n.attachment} | {n.page} | {text} |")
    return "\n".join(rows)


@asset(partitions_def=documents, group_name=GROUP, code_version="1", description="The document's file and content hash.")
def source_document(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    source = _source(settings, context.partition_key)
    ix.write_source(settings.lake, source)
    return MaterializeResult(
        metadata={"path": str(source.path), "format": source.format, "title": source.title, "content_hash": source.content_hash},
        data_version=DataVersion(source.content_hash),
    )


@asset(
    partitions_def=documents,
    group_name=GROUP,
    deps=[source_document],
    code_version=ix.PARSER_VERSION,
    description="document → section → paragraph → sentence nodes (Parquet, TREE_SCHEMA).",
    check_specs=[
        AssetCheckSpec("tree_not_empty", asset="document_tree", description="The tree has at least one sentence."),
        AssetCheckSpec("parents_exist", asset="document_tree", description="Every node's parent is in the tree."),
    ],
)
def document_tree(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    started = time.perf_counter()
    doc_id = context.partition_key
    source = _recorded_source(settings, doc_id)
    nodes, reused = ix.build_document_tree(settings.lake, source, settings.index_config())
    kinds = Counter(str(n.kind) for n in nodes)
    ids = {n.node_id for n in nodes}
    orphans = [n.node_id for n in nodes if n.parent_id is not None and n.parent_id not in ids]
    pages = {n.page for n in nodes if n.page is not None}
    return MaterializeResult(
        metadata={
            **{f"nodes/{k}": v for k, v in sorted(kinds.items())},
            "pages": len(pages),
            "tables": sum(1 for n in nodes if n.kind is NodeKind.PARAGRAPH and n.attachment is Attachment.TABLE),
            "figures": sum(1 for n in nodes if n.kind is NodeKind.PARAGRAPH and n.attachment is Attachment.IMAGE),
            "reused": reused,
            "seconds": round(time.perf_counter() - started, 3),
            "sample": MetadataValue.md(_sample_table(nodes)),
        },
        data_version=DataVersion(ix.tree_version(source.content_hash, settings.index_config())),
        check_results=[
            AssetCheckResult(check_name="tree_not_empty", passed=kinds.get("sentence", 0) > 0, metadata={"sentences": kinds.get("sentence", 0)}),
            AssetCheckResult(
                check_name="parents_exist",
                passed=not orphans,
                severity=AssetCheckSeverity.ERROR,
                metadata={"orphans": MetadataValue.json(orphans[:20])},
            ),
        ],
    )


@asset(partitions_def=documents, group_name=GROUP, deps=[document_tree, AssetKey("captions")], code_version=ix.EMBED_VERSION,
       description="Sentence vectors (cached by model and text hash).")
def leaf_embeddings(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    started = time.perf_counter()
    doc_id, lake, cfg = context.partition_key, settings.lake, settings.index_config()
    nodes = ix.indexed_tree(lake, doc_id, settings.index_config())
    embedder = settings.embedder()
    hits_before = getattr(embedder, "hits", 0)
    ids, matrix = ix.embed_leaves(nodes, embedder, cfg)
    kind_of = {n.node_id: str(n.kind) for n in nodes}
    version = ix.embeddings_version(ix.read_source(lake, doc_id)["content_hash"], cfg)
    if ix.caption_errors(lake, doc_id):
        version += ix.INCOMPLETE  # never "up to date": the next index run retries those figures
    ix.write_vectors(lake, ix.LEAF_EMBEDDINGS, doc_id, ids, [kind_of[i] for i in ids], matrix, version)
    return MaterializeResult(
        metadata={
            "vectors": len(ids),
            "dim": int(matrix.shape[1]),
            "cache_hits": getattr(embedder, "hits", 0) - hits_before,
            "model": embedder.model_id,
            "seconds": round(time.perf_counter() - started, 3),
        },
        data_version=DataVersion(version),
    )


@asset(
    partitions_def=documents,
    group_name=GROUP,
    deps=[leaf_embeddings],
    code_version=ix.EMBED_VERSION,
    description="Vectors for every node: parents are the length-weighted mean of their children.",
    check_specs=[AssetCheckSpec("vector_dims_agree", asset="node_embeddings", description="All vectors have the embedder's dimension.")],
)
def node_embeddings(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    doc_id, lake, cfg = context.partition_key, settings.lake, settings.index_config()
    nodes = ix.indexed_tree(lake, doc_id, settings.index_config())
    leaf_ids, _, leaf_matrix = ix.read_vectors(lake, ix.LEAF_EMBEDDINGS, doc_id)
    ids, kinds, matrix = ix.propagate_vectors(nodes, leaf_ids, leaf_matrix, cfg)
    version = ix.stored_version(lake, ix.LEAF_EMBEDDINGS, doc_id) or ""
    ix.write_vectors(lake, ix.NODE_EMBEDDINGS, doc_id, ids, kinds, matrix, version)
    dim = settings.embedder().dim
    return MaterializeResult(
        metadata={**{f"vectors/{k}": v for k, v in sorted(Counter(kinds).items())}, "dim": int(matrix.shape[1])},
        data_version=DataVersion(version),
        check_results=[
            AssetCheckResult(check_name="vector_dims_agree", passed=int(matrix.shape[1]) == dim,
                             metadata={"stored_dim": int(matrix.shape[1]), "embedder_dim": dim})
        ],
    )


@asset(partitions_def=documents, group_name=GROUP, deps=[node_embeddings], code_version="1",
       description="Nodes, vectors and BM25 text of one document: what the indexes are assembled from.")
def index_rows(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    doc_id, lake = context.partition_key, settings.lake
    nodes = ix.indexed_tree(lake, doc_id, settings.index_config())
    ids, _, matrix = ix.read_vectors(lake, ix.NODE_EMBEDDINGS, doc_id)
    source = ix.read_source(lake, doc_id)
    table = ix.index_rows_table(nodes, ids, matrix, source["title"])
    version = ix.stored_version(lake, ix.NODE_EMBEDDINGS, doc_id) or ""
    from kohaku_rag.lake import write_parquet_atomic

    write_parquet_atomic(table, lake.table(ix.INDEX_ROWS, doc_id), {ix.VERSION_KEY: version})
    return MaterializeResult(metadata={"rows": table.num_rows}, data_version=DataVersion(version))


# Assemble the indexes after per-document runs finish, whoever started them (sensor,
# schedule, a backfill in the UI); waiting while any document is still in progress.
ASSEMBLE_WHEN = (
    AutomationCondition.any_deps_updated().since_last_handled()
    & ~AutomationCondition.any_deps_in_progress()
    & ~AutomationCondition.in_progress()
)


def _registered(context: AssetExecutionContext) -> list[str]:
    return sorted(context.instance.get_dynamic_partitions(documents.name))


@asset(group_name=GROUP, deps=[index_rows], code_version="1", automation_condition=ASSEMBLE_WHEN,
       description="sqlite-vec index of sentence and paragraph vectors plus every node's text; upserted per document.",
       check_specs=[AssetCheckSpec("index_dims_agree", asset="vector_index")])
def vector_index(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    started = time.perf_counter()
    lake, embedder = settings.lake, settings.embedder()
    registered = _registered(context)
    stats = ix.assemble_vector_index(lake, registered, embedder.dim, embedder.model_id)
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
        check_results=[AssetCheckResult(check_name="index_dims_agree", passed=not wrong,
                                        metadata={"dim": embedder.dim, "mismatched": MetadataValue.json(wrong)})],
    )


@asset(group_name=GROUP, deps=[index_rows], code_version="1", automation_condition=ASSEMBLE_WHEN, description="BM25 over paragraph texts (with titles).")
def bm25_index(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    started = time.perf_counter()
    stats = ix.assemble_bm25(settings.lake, _registered(context))
    return MaterializeResult(
        metadata={"paragraphs": stats.paragraphs, "tokenized_documents": len(stats.tokenized),
                  "seconds": round(time.perf_counter() - started, 3),
                  "path": MetadataValue.path(str(settings.lake.bm25_path))}
    )


def stored_tree_counts(settings: KohakuSettings, doc_id: str) -> Counter[str]:
    path = settings.lake.table(ix.INDEX_ROWS, doc_id)
    return Counter(pq.read_table(path, columns=["kind"]).column("kind").to_pylist()) if path.exists() else Counter()


