"""The leaderboard: one row per scored config and per scored cross-config ensemble.

Rows are read from what the lake stores (scores by ensemble key); a config or spec that is
broken, or whose current answers were never scored, has no row.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from kohaku_rag.answering import store as st
from kohaku_rag.answering.config_folder import config_files, configs_dir, ensemble_files
from kohaku_rag.answering.cross_ensemble import gather, members_of
from kohaku_rag.answering.ensemble_spec import load_ensemble_spec
from kohaku_rag.answering.qa_config import load_qa_config
from kohaku_rag.errors import MissingPredictions
from kohaku_rag.evaluation.records import Answer
from kohaku_rag.evaluation.wattbot_csv import load_ref_urls
from kohaku_rag.lake import Lake


def _score_summary(path: Path) -> dict[str, Any] | None:
    """Mean WattBot components of a stored score table; None when nothing was scored."""
    if not path.exists() or pq.read_metadata(path).num_rows == 0:
        return None
    table = pq.read_table(path).to_pylist()
    n = len(table)
    return {
        "questions": n,
        **{
            k: sum(r[col] for r in table) / n
            for k, col in (("final", "total"), ("value", "value"), ("ref", "ref"), ("na", "na"))
        },
    }


def config_rows(lake: Lake) -> list[dict[str, Any]]:
    """Leaderboard rows of every config whose current ensemble has been scored."""
    rows: list[dict[str, Any]] = []
    for name, path in config_files(configs_dir(lake)).items():
        try:
            cfg = load_qa_config(path)
            keys = st.keys_for(lake, cfg)
        except (ValueError, FileNotFoundError):
            continue  # a broken or unrunnable config has no score to list
        summary = _score_summary(st.score_path(lake, keys.ensemble))
        if summary is None or st.missing_runs(lake, keys.prediction, cfg.voting.runs):
            continue  # not scored, or its runs hold failed calls (a score from them would mislead)
        n = summary["questions"]
        preds = [
            p
            for r in range(cfg.voting.runs)
            if st.run_path(lake, keys.prediction, r).exists()
            for p in st.read_run(lake, keys.prediction, r)
        ]
        rows.append(
            {
                "config": name,
                "kind": "config",
                "members": [name],
                "questions_file": cfg.questions,
                **summary,
                "runs": cfg.voting.runs,
                "vote_mode": cfg.voting.mode,
                "temperature": cfg.generation.temperature,
                "model": cfg.generation.llm.model,
                "top_k_final": cfg.retrieval.search.top_k_final,
                "budget_chars": cfg.retrieval.search.budget_chars,
                "use_planner": cfg.retrieval.use_planner,
                "llm_seconds_per_question": sum(p.seconds for p in preds) / n if n else 0.0,
                "retrieval_hash": cfg.retrieval_hash,
                "generation_hash": cfg.generation_hash,
                "voting_hash": cfg.voting_hash,
                "config_json": json.dumps(cfg.as_dict(), default=str),
            }
        )
    return rows


def ensemble_rows(lake: Lake) -> list[dict[str, Any]]:
    """Leaderboard rows of every spec whose current ensemble has been scored."""
    rows: list[dict[str, Any]] = []
    for name, path in ensemble_files(configs_dir(lake)).items():
        try:
            spec = load_ensemble_spec(path)
            members = members_of(lake, name, spec)
            pool = gather(lake, name, spec, members)
        except (ValueError, FileNotFoundError, MissingPredictions):
            continue  # a broken spec, or one whose members are not computed, has no score to list
        summary = _score_summary(st.score_path(lake, pool.key))
        if summary is None:
            continue
        rows.append(
            {
                "config": name,
                "kind": "ensemble",
                "members": list(spec.configs),
                "questions_file": next(iter(members.values())).questions,
                **summary,
                "runs": len(pool.voters),
                "vote_mode": spec.mode,
                "voting_hash": pool.key,
                "config_json": json.dumps(spec.as_dict()),
            }
        )
    return rows


def leaderboard_rows(lake: Lake) -> list[dict[str, Any]]:
    """Configs and ensembles in one schema, best final score first."""
    rows = config_rows(lake) + ensemble_rows(lake)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    rows = [{k: row.get(k) for k in columns} for row in rows]
    return sorted(rows, key=lambda r: -float(r["final"]))


def leaderboard_markdown(rows: list[dict[str, Any]], limit: int = 20) -> str:
    lines = ["| config | final | value | ref | na | runs |", "|---|---|---|---|---|---|"]
    lines += [
        f"| {r['config']} | {r['final']:.3f} | {r['value']:.3f} | {r['ref']:.3f} | {r['na']:.3f} | {r['runs']} |"
        for r in rows[:limit]
    ]
    return "\n".join(lines)


def ref_urls_for(corpus: Path, answers: dict[str, Answer]) -> dict[str, str] | None:
    """Document URLs from the corpus metadata.csv, when it lists every cited document
    (otherwise the submission's ref_url column says is_blank)."""
    path = corpus / "metadata.csv"
    if not path.exists():
        return None
    urls = load_ref_urls(path)
    cited = {r.lower() for a in answers.values() for r in a.ref_id}
    return urls if cited <= set(urls) else None
