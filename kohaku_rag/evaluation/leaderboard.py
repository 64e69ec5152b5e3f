"""The leaderboard: one row per scored config and per scored cross-config ensemble.

Rows are read from what the lake stores (scores by ensemble key); a config or spec that is
broken, or whose current answers were never scored, has no row. A config's row also scores
each of its stored runs (seeds): `final_mean` ± `final_sd`, the ensemble-size curve, what
its predictions cost (calls made, cache hits, tokens, LLM seconds), and a paired bootstrap
interval of its difference with the best row on the same questions (`significant_vs_best`).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from kohaku_rag.answering import qa_tables as st
from kohaku_rag.answering.config_folder import config_files, configs_dir, ensemble_files
from kohaku_rag.answering.cross_ensemble import gather, members_of
from kohaku_rag.answering.ensemble_spec import load_ensemble_spec
from kohaku_rag.answering.prediction import Prediction
from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answering.qa_config_file import load_qa_config
from kohaku_rag.answers.question_files import load_questions
from kohaku_rag.answers.records import FLAG_COLUMNS, Answer
from kohaku_rag.errors import MissingPredictions
from kohaku_rag.evaluation.metrics import ScoredRow, summarise
from kohaku_rag.evaluation.run_stats import ensemble_curve, mean_sd, paired_bootstrap, run_finals
from kohaku_rag.evaluation.scoring import per_type_accuracy
from kohaku_rag.evaluation.submissions import load_ref_urls
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import is_stored


def _score_summary(path: Path, metric: str) -> dict[str, Any] | None:
    """The chosen metric's components of a stored score table, reference precision/recall/F1,
    the false-answer rate on unanswerable questions and the per-flag wrong-rates (JSON
    text); None when nothing was scored."""
    if not is_stored(path) or pq.read_metadata(path).num_rows == 0:
        return None
    table = pq.read_table(path).to_pylist()
    report = summarise(metric, [ScoredRow.from_dict(r) for r in table])
    # A table scored before the counts were stored has no precision/recall/blank columns:
    # shown as unknown (–) until the config is scored again, never as 0.
    counted = "cited" in table[0]
    return {
        "questions": report.n,
        "metric": report.metric,
        "final": report.final,
        "value": report.value,
        "ref": report.ref,
        "na": report.na,
        "unit": report.unit,
        "ref_precision": report.ref_precision if counted else None,
        "ref_recall": report.ref_recall if counted else None,
        "ref_f1": report.ref_f1 if counted else None,
        "false_answer_rate": report.false_answer_rate if counted else None,
        "blank_rate": report.blank_rate if counted else None,
        "false_refusal_rate": report.false_refusal_rate if counted else None,
        "per_flag": json.dumps({k: v.as_dict() for k, v in report.per_flag.items()}),
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
        score_key = st.score_key(keys.ensemble, cfg.scoring.metric)
        summary = _score_summary(st.score_path(lake, score_key), cfg.scoring.metric)
        if summary is None or st.missing_runs(lake, keys.prediction, cfg.voting.runs):
            continue  # not scored, or its runs hold failed calls (a score from them would mislead)
        n = summary["questions"]
        preds = [
            p
            for r in range(cfg.voting.runs)
            if is_stored(st.run_path(lake, keys.prediction, r))
            for p in st.read_run(lake, keys.prediction, r)
        ]
        rows.append(
            {
                "config": name,
                "kind": "config",
                "score_key": score_key,
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
                **_seed_stats(lake, cfg, keys),
                **_cost(preds),
                **_breakdown(st.score_path(lake, score_key)),
                "retrieval_hash": cfg.retrieval_hash,
                "generation_hash": cfg.generation_hash,
                "voting_hash": cfg.voting_hash,
                "config_json": json.dumps(cfg.stored_dict(), default=str),
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
        metric = next(iter(members.values())).scoring.metric
        score_key = st.score_key(pool.key, metric)
        summary = _score_summary(st.score_path(lake, score_key), metric)
        if summary is None:
            continue
        rows.append(
            {
                "config": name,
                "kind": "ensemble",
                "score_key": score_key,
                "members": list(spec.configs),
                "questions_file": next(iter(members.values())).questions,
                **summary,
                "runs": len(pool.voters),
                "vote_mode": spec.mode,
                **_breakdown(st.score_path(lake, score_key)),
                "voting_hash": pool.key,
                "config_json": json.dumps(spec.as_dict()),
            }
        )
    return rows


def _seed_stats(lake: Lake, cfg: QAConfig, keys: st.QAKeys) -> dict[str, Any]:
    """Each stored run (seed) scored alone, their mean ± sd, and the ensemble-size curve
    (the score of m voted runs, m = 1..runs, averaged over subsets): no LLM call."""
    questions = load_questions(cfg.questions)
    runs = [st.answers_of(st.read_run(lake, keys.prediction, r)) for r in range(cfg.voting.runs)]
    known = st.corpus_ids(lake)
    metric = cfg.scoring.metric
    finals = run_finals(questions, runs, known, metric)
    mean, sd = mean_sd(finals)
    v = cfg.voting
    curve = ensemble_curve(questions, runs, v.mode, v.ignore_blank, v.tiebreak, known, metric=metric)
    return {"seeds": len(runs), "run_finals": finals, "final_mean": mean, "final_sd": sd, "ensemble_curve": curve}


def _cost(preds: list[Prediction]) -> dict[str, Any]:
    """What the stored predictions cost when they were computed (planner calls not included)."""
    calls = sum(p.llm_calls for p in preds)
    hits = sum(p.cached_calls for p in preds)
    seconds = sum(p.seconds for p in preds)
    return {
        "llm_calls_made": calls - hits,
        "llm_cache_hits": hits,
        "prompt_tokens": sum(p.prompt_tokens for p in preds),
        "completion_tokens": sum(p.completion_tokens for p in preds),
        "llm_seconds": seconds,
        "seconds_per_call": seconds / (calls - hits) if calls > hits else None,
    }


def _breakdown(path: Path) -> dict[str, Any]:
    """Accuracy per question type and the error taxonomy, as JSON text columns."""
    rows = pq.read_table(path).to_pylist() if is_stored(path) else []
    errors = Counter(str(r["error_type"]) for r in rows)
    return {
        "type_accuracy": json.dumps(per_type_accuracy(rows)) if rows else "{}",
        "error_types": json.dumps(dict(sorted(errors.items()))),
    }


def question_scores(lake: Lake, score_key: str) -> dict[str, float]:
    """question id -> its WattBot score in a stored score table."""
    path = st.score_path(lake, score_key)
    if not is_stored(path) or pq.read_metadata(path).num_rows == 0:
        return {}
    return {r["id"]: float(r["total"]) for r in pq.read_table(path, columns=["id", "total"]).to_pylist()}


def _significance(lake: Lake, rows: list[dict[str, Any]]) -> None:
    """Each row against the best row on the same question file under the same metric: the
    paired bootstrap 95% interval of (row − best) per question, and whether it excludes 0."""
    best: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:  # best first
        best.setdefault((str(row["questions_file"]), str(row["metric"])), row)
    cache: dict[str, dict[str, float]] = {}
    for row in rows:
        top = best[(str(row["questions_file"]), str(row["metric"]))]
        a = cache.setdefault(row["score_key"], question_scores(lake, row["score_key"]))
        b = cache.setdefault(top["score_key"], question_scores(lake, top["score_key"]))
        shared = sorted(set(a) & set(b))
        cmp = paired_bootstrap([a[q] for q in shared], [b[q] for q in shared])
        row.update(
            best_config=top["config"],
            diff_vs_best=cmp.diff,
            ci_low=cmp.low,
            ci_high=cmp.high,
            significant_vs_best=row is not top and cmp.significant,
        )


def leaderboard_rows(lake: Lake) -> list[dict[str, Any]]:
    """Configs and ensembles in one schema, best final score first."""
    rows = sorted(config_rows(lake) + ensemble_rows(lake), key=lambda r: -float(r["final"]))
    _significance(lake, rows)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    return [{k: row.get(k) for k in columns} for row in rows]


def _pm(row: dict[str, Any]) -> str:
    if row.get("final_mean") is None:
        return ""
    return f"{row['final_mean']:.3f} ± {row['final_sd']:.3f}"


def _vs_best(row: dict[str, Any]) -> str:
    """`−0.083 [−0.150, −0.020] *`: the difference with the best row, * when significant."""
    if row.get("diff_vs_best") is None or row["config"] == row.get("best_config"):
        return "best"
    mark = " *" if row.get("significant_vs_best") else ""
    return f"{row['diff_vs_best']:+.3f} [{row['ci_low']:+.3f}, {row['ci_high']:+.3f}]{mark}"


def leaderboard_markdown(rows: list[dict[str, Any]], limit: int = 20) -> str:
    """The table shown in the UI; * marks a difference with the best whose 95% interval excludes 0."""
    lines = [
        "| config | final | metric | value | ref | na | ref P / R | false answers | false refusals | runs "
        "| single run (mean ± sd) | vs best (95% CI) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['config']} | {r['final']:.3f} | {r.get('metric') or 'wattbot2025'} | {r['value']:.3f} | {r['ref']:.3f} "
        f"| {r['na']:.3f} | {_fraction(r.get('ref_precision'))} / {_fraction(r.get('ref_recall'))} "
        f"| {_fraction(r.get('false_answer_rate'))} | {_fraction(r.get('false_refusal_rate'))} | {r['runs']} "
        f"| {_pm(r)} | {_vs_best(r)} |"
        for r in rows[:limit]
    ]
    flagged = [r for r in rows[:limit] if r.get("per_flag") not in (None, "{}")]
    if flagged:
        lines += ["", "Wrong value rate per question flag:", "", "| config | " + " | ".join(FLAG_COLUMNS) + " |"]
        lines.append("|---" * (len(FLAG_COLUMNS) + 1) + "|")
        for r in flagged:
            rates = json.loads(r["per_flag"])
            cells = [f"{rates[f]['wrong_rate']:.2f} (n={rates[f]['n']})" if f in rates else "" for f in FLAG_COLUMNS]
            lines.append(f"| {r['config']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _fraction(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, (int, float)) else "–"


def ref_urls_for(corpus: Path, answers: dict[str, Answer]) -> dict[str, str] | None:
    """Document URLs from the corpus metadata.csv, when it lists every cited document
    (otherwise the submission's ref_url column says is_blank)."""
    path = corpus / "metadata.csv"
    if not path.exists():
        return None
    urls = load_ref_urls(path)
    cited = {r.lower() for a in answers.values() for r in a.ref_id}
    return urls if cited <= set(urls) else None
