"""A sweep's report: a DuckDB query over the leaderboard Parquet, PNG plots, and the same as
one Markdown or HTML file.

The table is one row per member: its swept values, the voted score, single-run mean ± sd
over seeds, the ensemble-size curve, the paired 95% interval against the best row and what
the member's predictions cost. The plots (written under `<lake>/qa/reports/<sweep>/`):
score vs each swept key with ±sd error bars (one line per combination of the other keys),
the ensemble-size curve, accuracy per question type, the error taxonomy per member, and
(when the question file has the 2026 flag columns) the wrong-value rate per flag. The table
names each member's metric ([scoring] metric) with its value/ref/na components, reference
precision/recall and the false-answer rate on unanswerable questions.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import matplotlib

matplotlib.use("Agg")  # files only, no display (the UI's workers and CI have none)
import matplotlib.pyplot as plt  # noqa: E402 - after the backend is chosen
from matplotlib.ticker import MaxNLocator  # noqa: E402

from kohaku_rag.answering import qa_tables as st  # noqa: E402
from kohaku_rag.answering.qa_config_file import config_to_mapping  # noqa: E402
from kohaku_rag.experiments.sweep import Member, Sweep, expand  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402

__all__ = ["Report", "build_report", "render_html", "render_markdown", "report_dir", "sweep_rows", "swept_value"]

COLUMNS = (
    "config",
    "final",
    "value",
    "ref",
    "na",
    "seeds",
    "final_mean",
    "final_sd",
    "run_finals",
    "ensemble_curve",
    "diff_vs_best",
    "ci_low",
    "ci_high",
    "significant_vs_best",
    "llm_calls_made",
    "llm_cache_hits",
    "prompt_tokens",
    "completion_tokens",
    "llm_seconds",
    "type_accuracy",
    "error_types",
    "metric",
    "ref_precision",
    "ref_recall",
    "false_answer_rate",
    "false_refusal_rate",
    "per_flag",
)


@dataclass(frozen=True)
class Report:
    sweep: str
    keys: tuple[str, ...]
    members: tuple[Member, ...]
    rows: tuple[dict[str, Any], ...]  # one per scored member, best first
    missing: tuple[str, ...]  # members not on the leaderboard yet
    plots: dict[str, Path]  # title -> PNG


def report_dir(lake: Lake, sweep: str) -> Path:
    return st.qa_dir(lake) / "reports" / sweep


def sweep_rows(lake: Lake, members: Sequence[str]) -> list[dict[str, Any]]:
    """The members' leaderboard rows (best first), by a DuckDB query over the Parquet."""
    path = st.leaderboard_path(lake)
    if not path.exists() or not members:
        return []
    con = duckdb.connect()
    try:
        have = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()}
        if "final_mean" not in have:  # written before seeds were scored: refresh the leaderboard
            return []
        cols = ", ".join(c for c in COLUMNS if c in have)
        result = con.execute(
            f"SELECT {cols} FROM read_parquet('{path}') WHERE kind = 'config' AND list_contains(?, config) "
            "ORDER BY final DESC",
            [list(members)],
        )
        names = [d[0] for d in result.description]
        return [dict(zip(names, row, strict=True)) for row in result.fetchall()]
    finally:
        con.close()


def swept_value(member: Member, key: str) -> Any:
    """The member's value of a swept key: its override, else what its config holds (a
    member of a list of variants leaves the other variants' keys at the base's values)."""
    overrides = dict(member.overrides)
    if key in overrides:
        return overrides[key]
    node: Any = config_to_mapping(member.config)
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _label(value: Any) -> str:
    return json.dumps(value) if isinstance(value, (list, tuple, bool)) or value is None else str(value)


def _plot_key(
    key: str, members: Sequence[Member], rows: Mapping[str, dict[str, Any]], keys: Sequence[str], out: Path
) -> Path:
    """Score vs `key`: single-run mean ± sd per value (one line per combination of the other
    keys), the voted ensemble as crosses."""
    values = list(dict.fromkeys(_label(swept_value(m, key)) for m in members))
    others = [k for k in keys if k != key]
    fig, ax = plt.subplots(figsize=(5.5, 3.6), dpi=90)
    lines: dict[str, list[Member]] = {}
    for m in members:
        lines.setdefault(
            ", ".join(f"{k.rsplit('.', 1)[-1]}={_label(swept_value(m, k))}" for k in others) or "all", []
        ).append(m)
    for n, (label, group) in enumerate(lines.items()):
        pts = [(values.index(_label(swept_value(m, key))), rows[m.name]) for m in group if m.name in rows]
        if not pts:
            continue
        x = [p[0] + 0.04 * n for p in pts]  # a small offset keeps overlapping error bars apart
        ax.errorbar(
            x,
            [p[1]["final_mean"] for p in pts],
            yerr=[p[1]["final_sd"] for p in pts],
            marker="o",
            capsize=4,
            label=label,
        )
        ax.scatter(x, [p[1]["final"] for p in pts], marker="x", color="black", zorder=3)
    ax.set_xticks(range(len(values)), values)
    ax.set_xlabel(key)
    ax.set_ylabel("WattBot score")
    ax.set_title("single run: mean ± sd over seeds; ×: the seeds voted", fontsize=9)
    ax.legend(fontsize=7)
    return _save(fig, out / f"score_vs_{key.replace('.', '_')}.png")


def _plot_curve(rows: Sequence[dict[str, Any]], out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(5.5, 3.6), dpi=90)
    for r in rows:
        curve = list(r["ensemble_curve"] or [])
        ax.plot(range(1, len(curve) + 1), curve, marker="o", label=str(r["config"]).split("--", 1)[-1])
    ax.set_xlabel("voted runs m")
    ax.set_ylabel("WattBot score (mean over subsets)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=6)
    return _save(fig, out / "ensemble_curve.png")


def _plot_bars(rows: Sequence[dict[str, Any]], column: str, title: str, stacked: bool, out: Path) -> Path:
    data = [json.loads(r[column] or "{}") for r in rows]
    kinds = sorted({k for d in data for k in d})
    fig, ax = plt.subplots(figsize=(6.5, 3.8), dpi=90)
    width = 0.8 / max(len(kinds), 1)
    bottom = [0.0] * len(rows)
    for n, kind in enumerate(kinds):
        heights = [float(d.get(kind, 0)) for d in data]
        if stacked:
            ax.bar(range(len(rows)), heights, bottom=bottom, label=kind)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        else:
            ax.bar([i + n * width for i in range(len(rows))], heights, width=width, label=kind)
    labels = [str(r["config"]).split("--", 1)[-1] for r in rows]  # the sweep's name is every member's prefix
    ax.set_xticks(range(len(rows)), labels, rotation=30, ha="right", fontsize=6)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    return _save(fig, out / f"{column}.png")


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def build_report(lake: Lake, sweep: Sweep) -> Report:
    """The table and the plots of a sweep, from the leaderboard (no LLM call)."""
    members = expand(sweep)
    rows = sweep_rows(lake, [m.name for m in members])
    by_name = {r["config"]: r for r in rows}
    out = report_dir(lake, sweep.name)
    plots: dict[str, Path] = {}
    if rows:
        for key in sweep.keys:
            plots[f"score vs {key}"] = _plot_key(key, members, by_name, sweep.keys, out)
        plots["ensemble-size curve"] = _plot_curve(rows, out)
        plots["accuracy per question type"] = _plot_bars(
            rows, "type_accuracy", "accuracy per question type", False, out
        )
        plots["error taxonomy"] = _plot_bars(rows, "error_types", "errors per member (questions)", True, out)
        flagged = [_flag_rates(r) for r in rows if r.get("per_flag") not in (None, "{}")]
        if flagged:  # the question file has the 2026 flag columns
            plots["wrong value rate per question flag"] = _plot_bars(
                flagged, "flag_wrong_rate", "wrong value rate per question flag", False, out
            )
    missing = tuple(m.name for m in members if m.name not in by_name)
    return Report(sweep.name, sweep.keys, tuple(members), tuple(rows), missing, plots)


def _flag_rates(row: dict[str, Any]) -> dict[str, Any]:
    rates = {flag: v["wrong_rate"] for flag, v in json.loads(row["per_flag"]).items()}
    return {"config": row["config"], "flag_wrong_rate": json.dumps(rates)}


def _num(value: Any, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def table(report: Report) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the report's table, as text cells."""
    members = {m.name: m for m in report.members}
    header = ["member", *(k.rsplit(".", 1)[-1] for k in report.keys), "voted", "metric", "value / ref / na",
              "ref P / R", "false answers / refusals", "single run mean ± sd", "seeds",
              "ensemble curve (m=1..)", "vs best (95% CI)", "LLM calls", "cache hits", "tokens", "LLM s"]  # fmt: skip
    lines = []
    for r in report.rows:
        m = members[r["config"]]
        curve = " → ".join(_num(v) for v in (r.get("ensemble_curve") or []))
        if r is report.rows[0]:
            vs = "best"
        elif r.get("diff_vs_best") is None or r.get("ci_low") is None:
            vs = ""
        else:
            vs = f"{r['diff_vs_best']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]"
            vs += " *" if r.get("significant_vs_best") else ""
        tokens = (r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0)
        cost = [str(r.get("llm_calls_made", "")), str(r.get("llm_cache_hits", "")), str(tokens)]
        lines.append(
            [m.name, *(_label(swept_value(m, k)) for k in report.keys), _num(r["final"]),
             str(r.get("metric") or "wattbot2025"), " / ".join(_num(r.get(k)) for k in ("value", "ref", "na")),
             f"{_num(r.get('ref_precision'))} / {_num(r.get('ref_recall'))}",
             f"{_num(r.get('false_answer_rate'))} / {_num(r.get('false_refusal_rate'))}",
             f"{_num(r['final_mean'])} ± {_num(r['final_sd'])}", str(r.get("seeds", "")), curve, vs,
             *cost, _num(r.get("llm_seconds"), 1)]
        )  # fmt: skip
    return header, lines


def render_markdown(report: Report, image_src: Mapping[str, str]) -> str:
    """The report as Markdown; `image_src` maps a plot's title to its link (a path, or a
    data: URI for the UI)."""
    header, rows = table(report)
    out = [f"# Sweep {report.sweep}", "", f"{len(report.rows)} of {len(report.members)} members scored"
           + (f" (missing: {', '.join(report.missing)})" if report.missing else "") + ". * : the 95% paired "
           "bootstrap interval of the difference with the best member excludes 0.", ""]  # fmt: skip
    out += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    for title, src in image_src.items():
        out += ["", f"## {title}", "", f"![{title}]({src})"]
    return "\n".join(out) + "\n"


def data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def render_html(report: Report) -> str:
    """One self-contained HTML file (the plots inlined)."""
    header, rows = table(report)
    esc = html.escape
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>Sweep {esc(report.sweep)}</title>",
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:4px 8px;font-size:13px}th{background:#f4f4f4}</style></head><body>",
        f"<h1>Sweep {esc(report.sweep)}</h1>",
        f"<p>{len(report.rows)} of {len(report.members)} members scored"
        + (f" (missing: {esc(', '.join(report.missing))})" if report.missing else "")
        + ". *: the 95% paired bootstrap interval of the difference with the best member excludes 0.</p>",
        "<table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>",
        *("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows),
        "</table>",
    ]
    for title, path in report.plots.items():
        parts.append(f"<h2>{esc(title)}</h2><img alt='{esc(title)}' src='{data_uri(path)}'>")
    return "\n".join(parts) + "</body></html>\n"
