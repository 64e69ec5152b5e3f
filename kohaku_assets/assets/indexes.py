"""The two indexes, assembled from every registered document's index rows.

They re-assemble by their automation condition after document runs finish, whoever
started them (sensor, schedule, a backfill in the UI), and `kohaku index` materializes
them after its document runs. "Up to date" means: assembled after the latest
materialization of every registered document's index rows; the automation condition
sensor (on by default, see definitions.py) re-assembles an index that is not.
"""

import time

from dagster import (
    AssetCheckResult,
    AssetExecutionContext,
    AutomationCondition,
    DataVersion,
    MaterializeResult,
    MetadataValue,
    ResourceParam,
    TableColumn,
    TableRecord,
    TableSchema,
    asset,
)

from kohaku_assets.assets.documents import index_rows
from kohaku_assets.partitions import INDEXING_GROUP, INDEXING_TAGS, OWNERS, check_spec, documents
from kohaku_assets.resources import KohakuSettings
from kohaku_assets.writer_lock import lake_writer
from kohaku_rag.config_files import stable_hash
from kohaku_rag.indexing import assembly, search_aids
from kohaku_rag.indexing import steps as ix
from kohaku_rag.indexing.expansions import EXTRACTOR_VERSION
from kohaku_rag.indexing.index_config import record_index_config
from kohaku_rag.lake.manifest import IndexPart
from kohaku_rag.model_pool import ModelPool
from kohaku_rag.stores.bm25 import FORMAT_VERSION, TOKENIZER_VERSION
from kohaku_rag.stores.vectors import SCHEMA_VERSION


def after_deps_update(label: str) -> AutomationCondition:
    """Run after any dep updated since this asset was last requested or updated (whoever
    materialized the dep: a sensor, the schedule, the CLI, a UI backfill), waiting while
    any dep is in progress. Unlike eager(), a dep with partitions never materialized does
    not block it. On the sensor's first evaluation (no previous tick to compare with) an
    asset that was never built is built if any dep has been."""
    updated = AutomationCondition.any_deps_updated().since_last_handled()
    never_built = (
        AutomationCondition.initial_evaluation()
        & AutomationCondition.missing()
        & AutomationCondition.any_deps_match(~AutomationCondition.missing())
    ).with_label("never built, deps built")
    return (
        (updated | never_built) & ~AutomationCondition.any_deps_in_progress() & ~AutomationCondition.in_progress()
    ).with_label(label)


ASSEMBLE_WHEN = after_deps_update("re-assemble after document updates")


def _registered(context: AssetExecutionContext) -> list[str]:
    return sorted(context.instance.get_dynamic_partitions(documents.name))


DOCUMENTS_SCHEMA = TableSchema(
    columns=[
        TableColumn("document", "string"),
        TableColumn("nodes", "int"),
        TableColumn("bar", "string", description="nodes relative to the largest document"),
        TableColumn("updated", "string", description="upserted by this run, or kept from the last generation"),
    ]
)


def documents_table(rows: list[tuple[str, int, str]]) -> MetadataValue:
    """Nodes per document as a table with a text bar, so outliers (an empty parse, a
    runaway one) stand out in the UI."""
    top = max((n for _, n, _ in rows), default=1) or 1
    records = [
        TableRecord({"document": d, "nodes": n, "bar": "█" * max(1, round(20 * n / top)), "updated": u})
        for d, n, u in rows
    ]
    return MetadataValue.table(records=records, schema=DOCUMENTS_SCHEMA)


def held_version(versions: dict[str, str]) -> DataVersion:
    """An index's data version: what it holds (each document's version). For the vector
    index it equals the index fingerprint stored answers are keyed by
    (kohaku_rag.answering.qa_tables.index_fingerprint), the `index_version` of a leaderboard row.
    The answering assets downstream show as stale when it changes (their next run recomputes;
    nothing re-runs by itself)."""
    return DataVersion(stable_hash([(d, v) for d, v in sorted(versions.items())]))


INDEX_DESCRIPTION = (
    " Up to date when assembled after the latest index rows of every registered document; "
    "re-assembled by its automation condition (the default automation condition sensor is on)."
)


@asset(
    group_name=INDEXING_GROUP,
    deps=[index_rows],
    owners=OWNERS,
    tags=INDEXING_TAGS,
    kinds={"sqlite", "python"},
    code_version=f"schema-{SCHEMA_VERSION}",
    automation_condition=ASSEMBLE_WHEN,
    description="sqlite-vec index of sentence and paragraph vectors plus every node's text; upserted per document."
    + INDEX_DESCRIPTION,
    check_specs=[
        check_spec(
            "index_dims_agree",
            "vector_index",
            "Every registered document's stored vectors have the dimension the index is queried with.",
            None,
        )
    ],
)
@lake_writer
def vector_index(
    context: AssetExecutionContext, settings: KohakuSettings, models: ResourceParam[ModelPool]
) -> MaterializeResult:
    started = time.perf_counter()
    lake, cfg = settings.lake, settings.index_config()
    record_index_config(lake, cfg)  # a lake first built from the UI records its settings here
    embedder = models.embedder(cfg.embedder, lake)
    registered = _registered(context)
    stats = assembly.assemble_vector_index(lake, registered, embedder.dim, embedder.model_id)
    # What this step built (staged: published with the other parts when they agree).
    part = stats.part or IndexPart({}, {})
    counts = {kind: part.total(kind) for kind in ("sentence", "paragraph")}
    upserted = set(stats.upserted)
    per_doc = [(d, c.get("nodes", 0), "this run" if d in upserted else "kept") for d, c in sorted(part.counts.items())]
    version = held_version(dict(part.rows_versions))
    vectors_file = part.files.get("vectors")
    # Every document's stored vectors must have the dimension the index is queried with.
    dims = {d: ix.stored_dim(lake, d) for d in registered}
    wrong = {d: n for d, n in dims.items() if n is not None and n != embedder.dim}
    return MaterializeResult(
        metadata={
            "documents": stats.documents,
            "upserted": len(stats.upserted),
            "deleted": MetadataValue.json(stats.deleted),
            "unchanged": stats.unchanged,
            # Why the store was rebuilt from every document's rows ("" when updated in place).
            "rebuilt": stats.rebuilt,
            **{f"vectors/{k}": v for k, v in counts.items()},
            "seconds": round(time.perf_counter() - started, 3),
            "path": MetadataValue.path(str(lake.index_dir / vectors_file.name if vectors_file else lake.vectors_path)),
            "published": stats.published,
            "per_document": documents_table(per_doc),
            "index_version": version.value,
        },
        data_version=version,
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
    owners=OWNERS,
    tags=INDEXING_TAGS,
    kinds={"python"},
    code_version=f"format-{FORMAT_VERSION}-tokenizer-{TOKENIZER_VERSION}",
    automation_condition=ASSEMBLE_WHEN,
    description="BM25 over paragraph texts (with titles)." + INDEX_DESCRIPTION,
)
@lake_writer
def bm25_index(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    started = time.perf_counter()
    stats = assembly.assemble_bm25(settings.lake, _registered(context))
    return MaterializeResult(
        metadata={
            "paragraphs": stats.paragraphs,
            "tokenized_documents": len(stats.tokenized),
            "seconds": round(time.perf_counter() - started, 3),
            "path": MetadataValue.path(str(settings.lake.bm25_path)),
            "published": stats.published,
        },
        data_version=held_version(stats.versions),
    )


@asset(
    name="search_aids",
    group_name=INDEXING_GROUP,
    deps=[index_rows],
    owners=OWNERS,
    tags=INDEXING_TAGS,
    kinds={"parquet", "python"},
    code_version=f"aids-{search_aids.SEARCH_AIDS_VERSION}-extractor-{EXTRACTOR_VERSION}",
    automation_condition=ASSEMBLE_WHEN,
    description="Search aids: the query-expansion dictionary (abbreviations defined in the documents, "
    "built-in units, the corpus's expansions.csv) and the documents' metadata (authors, year, title) "
    "for HERO's query expansion and metadata boost." + INDEX_DESCRIPTION,
)
@lake_writer
def search_aids_index(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    started = time.perf_counter()
    stats = search_aids.assemble_search_aids(settings.lake, _registered(context), settings.corpus)
    return MaterializeResult(
        metadata={
            "terms": stats.terms,
            "documents": stats.documents,
            "extracted_documents": len(stats.extracted),
            "seconds": round(time.perf_counter() - started, 3),
            "path": MetadataValue.path(str(search_aids.expansions_path(settings.lake))),
        },
        # What stored retrievals that use the aids are keyed by.
        data_version=DataVersion(search_aids.search_aids_fingerprint(settings.lake)),
    )


INDEXES = [vector_index, bm25_index, search_aids_index]
