"""A sweep's report as an asset, one partition per sweep file (kohaku_rag.experiments).

It reads the leaderboard Parquet (refreshed after its members' scores), so it never asks an
LLM: the table is `MetadataValue.table`, the plots are PNG files under
`LAKE/qa/reports/SWEEP/`, shown in the UI inline in `MetadataValue.md`, and the same report
is written as `report.md` and `report.html` next to them (what `kohaku report` writes).
"""

from typing import Any

from dagster import (
    AssetExecutionContext,
    Failure,
    MaterializeResult,
    MetadataValue,
    TableColumn,
    TableRecord,
    TableSchema,
    asset,
)

from kohaku_assets.assets.indexes import after_deps_update
from kohaku_assets.assets.leaderboard import leaderboard
from kohaku_assets.partitions import ANSWERING_GROUP, ANSWERING_TAGS, OWNERS, sweeps
from kohaku_assets.resources import KohakuSettings, lake_path
from kohaku_rag.experiments.report import Report, build_report, data_uri, render_html, render_markdown, table
from kohaku_rag.experiments.sweep import sweep_of, write_text

__all__ = ["sweep_report", "write_report"]


def write_report(report: Report) -> dict[str, Any]:
    """report.md (linking the PNGs beside it) and report.html (self-contained) in the report folder."""
    if not report.plots:
        return {}
    folder = next(iter(report.plots.values())).parent
    md = render_markdown(report, {title: path.name for title, path in report.plots.items()})
    write_text(folder / "report.md", md)
    write_text(folder / "report.html", render_html(report))
    return {"markdown": folder / "report.md", "html": folder / "report.html"}


def _table(report: Report) -> MetadataValue:
    header, rows = table(report)
    names = [h.replace(" ", "_") for h in header]
    return MetadataValue.table(
        records=[TableRecord(dict(zip(names, row, strict=True))) for row in rows],
        schema=TableSchema(columns=[TableColumn(n, "string") for n in names]),
    )


@asset(
    partitions_def=sweeps,
    group_name=ANSWERING_GROUP,
    deps=[leaderboard],
    owners=OWNERS,
    tags=ANSWERING_TAGS,
    kinds={"duckdb", "python"},
    code_version="1",
    automation_condition=after_deps_update("refresh after the leaderboard"),
    description="A sweep's table (members, voted score, single-run mean ± sd over seeds, ensemble-size curve, "
    "paired bootstrap interval vs the best, cost) and plots, from the leaderboard: "
    f"`{lake_path('qa', 'reports')}/SWEEP/`.",
)
def sweep_report(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    lake = settings.lake
    try:
        sweep = sweep_of(lake, context.partition_key)
    except (ValueError, OSError) as exc:
        raise Failure(description=f"sweep {context.partition_key!r}: {exc}", allow_retries=False) from None
    report = build_report(lake, sweep)
    files = write_report(report)
    images = "\n\n".join(f"**{title}**\n\n![{title}]({data_uri(path)})" for title, path in report.plots.items())
    best = report.rows[0] if report.rows else None
    return MaterializeResult(
        metadata={
            "members": len(report.members),
            "scored": len(report.rows),
            "missing": MetadataValue.json(list(report.missing)),
            "table": _table(report),
            "plots": MetadataValue.md(images or "no member is scored yet"),
            **({"best": str(best["config"]), "best_final": float(best["final"])} if best else {}),
            **{name: MetadataValue.path(str(path)) for name, path in files.items()},
        }
    )
