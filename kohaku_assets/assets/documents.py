"""Per-document assets: source → tree → captions → leaf vectors → node vectors → index rows.

Asset functions stay thin: each calls one step of `kohaku_rag.indexing.steps` and reports
metadata. The lake is written by the library (Parquet by partition, atomically), so the
assets declare their upstreams with `deps`. The tree's checks sit beside it.
"""

import base64
import io
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    ResourceParam,
    TableColumn,
    TableRecord,
    TableSchema,
    asset,
)
from PIL import Image

from kohaku_assets.partitions import INDEXING_GROUP, INDEXING_TAGS, OWNERS, check_spec, documents
from kohaku_assets.resources import KohakuSettings
from kohaku_rag.document.tree import Attachment, Node, NodeKind
from kohaku_rag.indexing import steps as ix
from kohaku_rag.indexing.captions import VisionLLMCaptioner
from kohaku_rag.indexing.corpus import DocFormat, DocumentMeta, SourceDocument, resolve_source
from kohaku_rag.indexing.failures import clear_failure, remembering_failure
from kohaku_rag.indexing.table_repair import REPAIR_VERSION, repair_document, repairs_digest
from kohaku_rag.model_pool import ModelPool
from kohaku_rag.progress import Ticker


@contextmanager
def _remembering_failure(settings: KohakuSettings, doc_id: str) -> Iterator[None]:
    """A step reading the document's bytes (source, tree) that fails by the document's
    fault records the failure (see kohaku_rag.indexing.failures), so the sensor and
    `kohaku index` do not retry it until it changes; the later steps only read the lake.
    Dagster still logs the full traceback in the run's event log."""
    lake, corpus, cfg = settings.lake, settings.corpus, settings.index_config()
    with remembering_failure(
        lake,
        corpus,
        doc_id,
        lambda content_hash: ix.embeddings_version(content_hash, cfg, ix.repaired_of(lake, doc_id, cfg)),
    ):
        yield


def recorded_source(settings: KohakuSettings, doc_id: str) -> SourceDocument:
    """The source as `source_document` recorded it, so later steps read the same bytes' hash."""
    row = ix.read_source(settings.lake, doc_id)
    meta = DocumentMeta(doc_id, row["title"] if row["title"] != doc_id else "", row["url"])
    return SourceDocument(doc_id, Path(row["path"]), cast(DocFormat, row["format"]), row["content_hash"], meta)


def cut_at_word(text: str, limit: int = 160) -> str:
    """`text` on one line, at most `limit` characters, cut at a word boundary with "…"."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    head = flat[: limit - 1]
    space = head.rfind(" ")
    return (head[:space] if space > limit // 2 else head).rstrip(" ,;:") + "…"


SAMPLE_SCHEMA = TableSchema(
    columns=[
        TableColumn("node_id", "string"),
        TableColumn("kind", "string", description="the node kind (paragraph)"),
        TableColumn("attachment", "string", description="text, table or image"),
        TableColumn("page", "int"),
        TableColumn("text", "string", description="cut at a word boundary"),
    ]
)


def sample_table(nodes: list[Node], limit: int = 5) -> MetadataValue:
    """The first paragraphs of the tree as a table in the UI."""
    picks = [n for n in nodes if n.kind is NodeKind.PARAGRAPH][:limit]
    records = [
        TableRecord(
            {
                "node_id": n.node_id,
                "kind": str(n.kind),
                "attachment": str(n.attachment),
                "page": n.page if n.page is not None else -1,
                "text": cut_at_word(n.text),
            }
        )
        for n in picks
    ]
    return MetadataValue.table(records=records, schema=SAMPLE_SCHEMA)


# The conventions every per-document asset shares.
COMMON: dict[str, Any] = {
    "partitions_def": documents,
    "group_name": INDEXING_GROUP,
    "owners": OWNERS,
    "tags": INDEXING_TAGS,
}


@asset(
    **COMMON,
    kinds={"pdf", "parquet", "python"},
    code_version="1",
    description="The document's file and content hash.",
)
def source_document(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    policy = settings.index_config().download_policy
    with _remembering_failure(settings, context.partition_key):
        source = resolve_source(
            settings.corpus,
            settings.lake.sources_dir,
            context.partition_key,
            policy,
            follow_links=settings.follow_links,
        )
        ix.write_source(settings.lake, source)
    return MaterializeResult(
        metadata={
            "path": MetadataValue.path(str(source.path)),
            "format": source.format,
            "title": source.title,
            "content_hash": source.content_hash,
        },
        data_version=DataVersion(source.content_hash),
    )


@asset(
    **COMMON,
    deps=[source_document],
    kinds={"pdf", "parquet", "python"},
    code_version=ix.PARSER_VERSION,
    description="document → section → paragraph → sentence nodes (Parquet, TREE_SCHEMA).",
    check_specs=[
        check_spec("tree_not_empty", "document_tree", "The tree has at least one sentence.", documents),
        check_spec("parents_exist", "document_tree", "Every node's parent is in the tree.", documents),
    ],
)
def document_tree(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    started = time.perf_counter()
    source = recorded_source(settings, context.partition_key)
    cfg = settings.index_config()
    with _remembering_failure(settings, context.partition_key):
        nodes, reused = ix.build_document_tree(settings.lake, source, cfg)
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
            # tables cut to their first rows at indexing, each with what was kept
            "tables_cut": "; ".join(ix.tables_cut(settings.lake, context.partition_key)) or "none",
            "seconds": round(time.perf_counter() - started, 3),
            "sample": sample_table(nodes),
        },
        data_version=DataVersion(
            ix.tree_version(source.content_hash, cfg, ix.repaired_of(settings.lake, context.partition_key, cfg))
        ),
        check_results=[
            AssetCheckResult(
                check_name="tree_not_empty",
                passed=kinds.get("sentence", 0) > 0,
                severity=AssetCheckSeverity.WARN,  # figures-only documents still index
                metadata={"sentences": kinds.get("sentence", 0)},
            ),
            AssetCheckResult(
                check_name="parents_exist",
                passed=not orphans,
                severity=AssetCheckSeverity.ERROR,
                metadata={"orphans": MetadataValue.json(orphans[:20])},
            ),
        ],
    )


THUMBNAILS = 3


def _thumbnails(settings: KohakuSettings, hashes: list[str]) -> str:
    """A few figures inline in the UI, shrunk so the metadata stays small."""
    parts = []
    for digest in hashes[:THUMBNAILS]:
        try:
            with Image.open(settings.lake.blob(digest)) as img:
                img.thumbnail((240, 240))
                buf = io.BytesIO()
                img.convert("RGB").save(buf, format="JPEG", quality=70)
        except (OSError, ValueError) as exc:  # an unreadable image is already reported with its caption
            parts.append(f"(figure {digest[:8]} unreadable: {exc})")
            continue
        parts.append(f"![figure {digest[:8]}](data:image/jpeg;base64,{base64.b64encode(buf.getvalue()).decode()})")
    return "\n\n".join(parts) or "(no figures)"


@asset(
    **COMMON,
    deps=[document_tree],
    kinds={"parquet", "python"},
    code_version="1",
    description="Figure captions: PDF caption + OCR text (offline) or a vision model's description.",
)
def captions(
    context: AssetExecutionContext, settings: KohakuSettings, models: ResourceParam[ModelPool]
) -> MaterializeResult:
    started = time.perf_counter()
    doc_id, lake, cfg = context.partition_key, settings.lake, settings.index_config()
    nodes = ix.read_tree(lake, doc_id)
    version = ix.captions_version(ix.read_source(lake, doc_id)["content_hash"], cfg, ix.repaired_of(lake, doc_id, cfg))
    captioner = models.captioner(cfg)
    try:
        stats = ix.caption_figures(lake, doc_id, nodes, captioner, version)
    finally:
        if isinstance(captioner, VisionLLMCaptioner):
            captioner.close()  # its HTTP client; the OCR engine stays loaded in the pool
    for node_id, why in stats.errors.items():
        context.log.warning(f"{doc_id}: figure {node_id} kept its PDF caption only: {why}")
    hashes = [n.media_hash for n in nodes if n.media_hash]
    return MaterializeResult(
        metadata={
            "figures": stats.figures,
            "cache_hits": stats.cache_hits,
            "caption_chars": stats.caption_chars,
            "captioner_chars": stats.captioner_chars,
            "errors": MetadataValue.json(stats.errors),
            "captioner": captioner.captioner_id if captioner else "none",
            "seconds": round(time.perf_counter() - started, 3),
            "thumbnails": MetadataValue.md(_thumbnails(settings, hashes)) if hashes else "(no figures)",
        },
        data_version=DataVersion(version),
    )


@asset(
    **COMMON,
    deps=[document_tree, captions],
    kinds={"parquet", "python"},
    code_version=ix.EMBED_VERSION,
    description="Sentence vectors (cached by model and text hash).",
)
def leaf_embeddings(
    context: AssetExecutionContext, settings: KohakuSettings, models: ResourceParam[ModelPool]
) -> MaterializeResult:
    started = time.perf_counter()
    cfg = settings.index_config()
    embedder = models.embedder(cfg.embedder, settings.lake)
    hits_before = getattr(embedder, "hits", 0)
    ids, matrix, version = ix.embed_document(settings.lake, context.partition_key, cfg, embedder)
    image_errors = ix.image_errors(settings.lake, context.partition_key)
    for node_id, why in image_errors.items():
        context.log.warning(f"{context.partition_key}: figure {node_id} kept its caption vector: {why}")
    return MaterializeResult(
        metadata={
            "vectors": len(ids),
            "image_errors": MetadataValue.json(image_errors),
            "dim": int(matrix.shape[1]),
            "cache_hits": getattr(embedder, "hits", 0) - hits_before,
            "model": embedder.model_id,
            "seconds": round(time.perf_counter() - started, 3),
        },
        data_version=DataVersion(version),
    )


@asset(
    **COMMON,
    deps=[leaf_embeddings],
    kinds={"parquet", "python"},
    code_version=ix.EMBED_VERSION,
    description="Vectors for every node: parents are the length-weighted mean of their children.",
    check_specs=[
        check_spec("vector_dims_agree", "node_embeddings", "All vectors have the embedder's dimension.", documents)
    ],
)
def node_embeddings(
    context: AssetExecutionContext, settings: KohakuSettings, models: ResourceParam[ModelPool]
) -> MaterializeResult:
    cfg = settings.index_config()
    kinds, matrix, version = ix.propagate_document(settings.lake, context.partition_key, cfg)
    dim = models.embedder(cfg.embedder, settings.lake).dim
    return MaterializeResult(
        metadata={**{f"vectors/{k}": v for k, v in sorted(Counter(kinds).items())}, "dim": int(matrix.shape[1])},
        data_version=DataVersion(version),
        check_results=[
            AssetCheckResult(
                check_name="vector_dims_agree",
                passed=int(matrix.shape[1]) == dim,
                metadata={"stored_dim": int(matrix.shape[1]), "embedder_dim": dim},
            )
        ],
    )


@asset(
    **COMMON,
    deps=[node_embeddings],
    kinds={"parquet", "python"},
    code_version="1",
    description="Nodes, vectors and BM25 text of one document: what the indexes are assembled from.",
)
def index_rows(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    table, version = ix.write_index_rows(settings.lake, context.partition_key, settings.index_config())
    # The whole chain succeeded (whoever asked: a UI materialization retries a failure).
    clear_failure(settings.lake, context.partition_key)
    return MaterializeResult(metadata={"rows": table.num_rows}, data_version=DataVersion(version))


@asset(
    **COMMON,
    deps=[document_tree],
    kinds={"parquet", "python"},
    code_version=REPAIR_VERSION,
    description=(
        "Text tables the parser could not align, written as rows and columns by the index's model and kept "
        "only when every cell is copied from the table's text (index setting table_repair). The tree reads "
        "them at its next build; `kohaku index` rebuilds the repaired documents once the repairs are in."
    ),
)
def table_repairs(
    context: AssetExecutionContext, settings: KohakuSettings, models: ResourceParam[ModelPool]
) -> MaterializeResult:
    cfg, lake, doc_id = settings.index_config(), settings.lake, context.partition_key
    source = recorded_source(settings, doc_id)
    if not (cfg.table_repair and cfg.table_records) or source.format == "pdf":
        why = "table_repair is off" if not cfg.table_repair else "only text tables are repaired"
        return MaterializeResult(metadata={"skipped": why}, data_version=DataVersion("off"))
    ticker = Ticker("repaired tables of " + doc_id, 0, context.log.info)

    def progress(done: int, total: int) -> None:
        ticker.total = total
        ticker.tick()

    stats = repair_document(lake, source, models.chat(cfg.table_repair_llm, lake), cfg.repair_model,
                            cfg.use_outline, progress)  # fmt: skip
    for key, why in stats.refused.items():
        context.log.info(f"{doc_id}: table {key[:8]} stays text: {why}")
    return MaterializeResult(
        metadata={
            "unaligned_tables": stats.blocks,
            "asked": stats.asked,
            "repaired": stats.accepted,
            "refused": MetadataValue.json(stats.refused),
            "seconds": round(stats.seconds, 1),
            "seconds_per_table": round(stats.seconds / stats.asked, 1) if stats.asked else 0.0,
        },
        data_version=DataVersion(repairs_digest(lake, doc_id) or "none"),
    )


PER_DOCUMENT = [source_document, document_tree, captions, leaf_embeddings, node_embeddings, index_rows]
