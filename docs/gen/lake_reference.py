"""The lake's tables and files, generated from the code that names them: the Dagster assets
of the code location (each a Parquet table per partition) and the path functions the
library writes through. A file the code stops writing leaves this page with it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kohaku_assets.definitions import defs
from kohaku_assets.resources import REPO_ROOT
from kohaku_rag.answering import qa_tables as store
from kohaku_rag.answering.config_folder import configs_dir, ensembles_dir
from kohaku_rag.experiments.report import report_dir
from kohaku_rag.indexing.failures import failure_path
from kohaku_rag.indexing.search_aids import doc_metadata_path, expansions_path
from kohaku_rag.lake.layout import Lake

ROOT = Path("data_lake")


def _where(fn: Callable[..., Path], *args: object) -> str:
    text = str(fn(Lake(ROOT), *args)) if fn is not ensembles_dir else str(fn(configs_dir(Lake(ROOT))))
    for placeholder, shown in (("DOC", "<doc>"), ("KEY", "<key>"), ("NAME", "<name>"), ("-7", "-<r>")):
        text = text.replace(placeholder, shown)
    return text


def _doc(fn: Callable[..., object]) -> str:
    return " ".join((fn.__doc__ or "").split())


def files() -> list[tuple[str, str]]:
    """(path under the lake, what it holds), each path computed by the function that writes it."""
    lake = Lake(ROOT)
    rows: list[tuple[str, str]] = [
        (
            str(lake.table("ASSET", "PARTITION")).replace("ASSET", "<asset>").replace("PARTITION", "<partition>"),
            "an asset's table for one partition (see the assets below)",
        ),
        (str(lake.blob("DIGEST")).replace("DI/DIGEST", "<di>/<digest>"), "a figure or page image, by content hash"),
        (str(lake.vectors_path), "the vector index: the node tree and its vectors (sqlite-vec)"),
        (str(lake.bm25_path), "the BM25 index over paragraphs"),
        (_where(expansions_path), "the query-expansion dictionary (search aids)"),
        (_where(doc_metadata_path), "document metadata a question can name (search aids)"),
        (str(lake.index_config_path), _doc(Lake.index_config_path.fget)),  # type: ignore[attr-defined]
        (str(lake.sources_dir), _doc(Lake.sources_dir.fget)),  # type: ignore[attr-defined]
        (
            str(lake.cache_dir),
            "caches: embeddings by model and text hash, captions by image hash, LLM replies, BM25 tokens",
        ),
        (
            str(lake.root / "models"),
            "a GGUF a config names by relative path; the bundled model is stored once per machine "
            "($KOHAKU_MODEL_DIR, else ~/.cache/kohaku-lake/models), not here (a lake made earlier may hold a copy)",
        ),
        (_where(failure_path, "DOC"), "a document's remembered failure (file hash, settings and code version)"),
        (str(configs_dir(lake)), _doc(configs_dir) + " One QA config per file"),
        (_where(ensembles_dir), "ensemble spec files"),
        (_where(store.retrieval_path, "KEY"), "one row per question: planned queries, context"),
        (_where(store.run_path, "KEY", 7), "one row per question for run r (seed r)"),
        (_where(store.debug_path, "KEY", 7), _doc(store.debug_path)),
        (_where(store.ensemble_path, "KEY"), "the voted answer per question"),
        (_where(store.score_path, "KEY"), _doc(store.score_key)),
        (_where(store.submission_path, "NAME"), "a config's ensemble as a WattBot submission CSV"),
        (_where(store.leaderboard_path), "one row per scored config and cross-config ensemble"),
        (_where(report_dir, "NAME"), "a sweep's report: report.md, report.html and its plots"),
        (str(lake.dagster_home), "the lake's Dagster instance (runs, event logs, dagster.yaml)"),
        (str(lake.root / ".lake.lock"), "the writer lock (an OS file lock; one writer at a time)"),
    ]
    return rows


def assets() -> list[tuple[str, str, str, str, str]]:
    """(asset, group, partitions, kinds, description) of every asset of the code location."""
    out = []
    for spec in sorted(defs.resolve_all_asset_specs(), key=lambda s: (s.group_name or "", s.key.to_user_string())):
        partitions = getattr(spec.partitions_def, "name", None) or ("" if spec.partitions_def is None else "yes")
        # Descriptions name the lake's path on this machine; the page shows it relative.
        description = " ".join((spec.description or "").split()).replace(f"{REPO_ROOT}/", "")
        out.append(
            (spec.key.to_user_string(), spec.group_name or "", partitions, ", ".join(sorted(spec.kinds)), description)
        )
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def page() -> str:
    lines = [
        "# The lake's tables and files",
        "",
        "Generated from the code: the paths below are computed by the functions that write them "
        "(for a lake at `data_lake/`), and the assets are those of the `kohaku-lake` code location. "
        "The per-document tables are the record; the indexes, caches and answering tables are "
        "derived from them and rebuilt when damaged (see [failure handling](../explanation/failures.md)). "
        "Every write goes to a temporary file in the same folder and is renamed into place.",
        "",
        "## Files",
        "",
        "| path | what it holds |",
        "|---|---|",
        *[f"| `{_cell(path)}` | {_cell(what)} |" for path, what in files()],
        "",
        "The answering tables' keys chain: `retrieval_key` = (retrieval hash, question file content, "
        "index contents); `prediction_key` = (generation hash, retrieval key); `ensemble_key` = "
        "(voting hash, prediction key). A table whose key is on disk is reused, never recomputed.",
        "",
        "## Assets",
        "",
        "Each asset materializes into `data_lake/<asset>/<partition>.parquet` (per-document assets: one "
        "file per document) unless its description says otherwise.",
        "",
        "| asset | group | partitions | kinds | description |",
        "|---|---|---|---|---|",
        *[f"| `{a}` | {g} | {p} | {k} | {_cell(d)} |" for a, g, p, k, d in assets()],
        "",
    ]
    return "\n".join(lines)
