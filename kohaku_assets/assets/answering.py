"""Answering assets, partitioned by configuration file.

A folder of config files (default `LAKE/configs`, env KOHAKU_CONFIGS) defines the
`configs` dynamic partitions; `configs_sensor` adds and removes them as files appear and
go. Every asset stores its table under the hash of what made it
(kohaku_rag.answering.qa_tables), so materializing an edited config recomputes only the parts
its edit changed; the others report `reused`.

A question whose LLM call failed (the endpoint down after its retries) fails the step with
"N of M questions failed: REASON; re-run to retry them" once the good rows are stored;
the next materialization asks only the failed questions again.
"""

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetExecutionContext,
    DataVersion,
    Failure,
    MaterializeResult,
    MetadataValue,
    ResourceParam,
    asset,
)

from kohaku_assets.assets.indexes import INDEXES
from kohaku_assets.partitions import ANSWERING_GROUP as GROUP
from kohaku_assets.partitions import ANSWERING_TAGS, OWNERS, check_spec, configs
from kohaku_assets.resources import KohakuSettings, lake_path
from kohaku_assets.writer_lock import lake_writer
from kohaku_rag.answering import qa_tables as st
from kohaku_rag.answering.config_folder import config_of, configs_dir
from kohaku_rag.answering.prediction import Prediction
from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answering.qa_config_file import CONFIG_VERSION
from kohaku_rag.answering.time_split import time_split
from kohaku_rag.answers.question_files import load_questions
from kohaku_rag.evaluation.leaderboard import ref_urls_for
from kohaku_rag.evaluation.scoring import per_type_accuracy, score_answers, worst_table
from kohaku_rag.evaluation.submissions import to_submission_rows, write_submission_csv
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import is_stored, parquet_metadata, write_parquet_atomic
from kohaku_rag.llm import ChatModel
from kohaku_rag.model_pool import ModelPool


def partition_config(settings: KohakuSettings, name: str) -> QAConfig:
    """The partition's config; a missing or invalid file fails the step with a
    `dagster.Failure` that names the file and how to fix it (shown in the run's panel)."""
    folder = configs_dir(settings.lake)
    try:
        return config_of(settings.lake, name)
    except (ValueError, OSError) as exc:
        missing = not any((folder / f"{name}{ext}").exists() for ext in (".toml", ".json"))
        fix = (
            f"create {folder / (name + '.toml')} (e.g. copy {folder / 'default.toml'}, or run "
            f"`kohaku config show default > {folder / (name + '.toml')}`), then re-run the partition"
            if missing
            else f"fix {name}.toml/.json in {folder} (`kohaku config show {name}` names the line), then re-run"
        )
        what = f"no config file for partition {name!r}" if missing else f"config {name!r} is invalid: {exc}"
        raise Failure(
            description=f"{what}; {fix}",
            metadata={"configs_folder": MetadataValue.path(str(folder)), "error": str(exc)},
            allow_retries=False,
        ) from None  # the description says it all: no chained traceback under it in the UI


def _partition(settings: KohakuSettings, context: AssetExecutionContext) -> tuple[Lake, QAConfig, st.QAKeys]:
    """The lake, the partition's config and the keys its tables are stored under."""
    cfg = partition_config(settings, context.partition_key)
    return settings.lake, cfg, st.keys_for(settings.lake, cfg)


# The conventions every answering asset shares (kinds, owners, tags; per-config partitions).
COMMON: dict[str, Any] = {"partitions_def": configs, "group_name": GROUP, "owners": OWNERS, "tags": ANSWERING_TAGS}


def _calls(chat: ChatModel) -> tuple[int, int]:
    return getattr(chat, "hits", 0), getattr(chat, "misses", 0)


def _asked(fresh: dict[int, list[Prediction]]) -> dict[str, Any]:
    preds = [p for run in fresh.values() for p in run]
    asked = sorted({p.question_id for p in preds if p.llm_calls > p.cached_calls})
    cached = sorted({p.question_id for p in preds} - set(asked))
    return {
        "questions_asked_llm": len(asked),
        "questions_from_cache": len(cached),
        "asked_llm_ids": MetadataValue.json(asked[:50]),
    }


def _failure(exc: st.QuestionsFailed, **metadata: Any) -> Failure:
    """The step's failure: one line naming how many questions failed and the first reason."""
    return Failure(
        description=str(exc),
        metadata={
            "failed_questions": len(exc.failed),
            "questions": exc.total,
            "failed": MetadataValue.json(dict(list(exc.failed.items())[:20])),
            **metadata,
        },
    )


@asset(
    **COMMON,
    kinds={"csv", "python"},
    code_version=str(CONFIG_VERSION),
    description="The config's WattBot-format question file (its path is part of the config).",
)
@lake_writer
def question_set(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    cfg = partition_config(settings, context.partition_key)
    questions = load_questions(cfg.questions)
    sha = st.file_sha(Path(cfg.questions))
    return MaterializeResult(
        metadata={
            "path": MetadataValue.path(cfg.questions),
            "questions": len(questions),
            "with_gold": sum(q.gold is not None for q in questions),
            "content_hash": sha,
        },
        data_version=DataVersion(sha),
    )


@asset(
    **COMMON,
    # The indexes are upstream: a re-index shows every config's answers as stale in the UI
    # (their stored tables are keyed by the index, so their next run recomputes), and no
    # automation condition starts an LLM run for it.
    deps=[question_set, *INDEXES],
    kinds={"parquet", "python"},
    code_version=str(CONFIG_VERSION),
    description="Planned queries and retrieved context per question, stored by retrieval hash "
    "(the config's retrieval settings, its question file and the index it searched).",
    check_specs=[
        check_spec(
            "every_question_retrieved",
            "retrievals",
            "Every question's retrieval succeeded (a failed planner call fails it; the next run retries it). "
            "When all failed the step fails instead.",
            configs,
        )
    ],
)
@lake_writer
def retrievals(
    context: AssetExecutionContext, settings: KohakuSettings, models: ResourceParam[ModelPool]
) -> MaterializeResult:
    started = time.perf_counter()
    lake, cfg, keys = _partition(settings, context)
    path = st.retrieval_path(lake, keys.retrieval)
    questions = load_questions(cfg.questions)
    # A stored table is reused; its failed questions (a planner outage) are retrieved again.
    stored = is_stored(path)  # an unreadable table is missing: computed again
    stored_errors = st.retrieval_errors(path) if stored else {}
    todo = questions if not stored else [q for q in questions if q.id in stored_errors]
    reused = not todo
    planner_calls = planner_hits = 0
    if todo:
        chat = models.chat(cfg.planner_llm, lake) if cfg.retrieval.uses_llm else None
        before = _calls(chat) if chat is not None else (0, 0)
        rows = st.compute_retrievals(
            todo, cfg, models.retriever(lake, settings.index_config()), chat, progress=context.log.info
        )
        if chat is not None:  # the planner's (and diverse rerank's) calls, for the cost of a sweep
            planner_hits, planner_calls = (a - b for a, b in zip(_calls(chat), before, strict=True))
        merged = st.merge_rows(path, rows, [q.id for q in questions])
        st.write_rows(merged, path, {"retrieval_hash": cfg.retrieval_hash})
    failed = st.retrieval_errors(path)
    if failed and len(failed) == len(questions):  # nothing was retrieved: not a materialization
        raise _failure(st.QuestionsFailed(failed, len(questions)), key=keys.retrieval)
    table = st.read_retrievals(path)
    return MaterializeResult(
        check_results=[retrieval_check(failed, len(questions))],
        metadata={
            "reused": reused,
            "key": keys.retrieval,
            "retrieval_hash": cfg.retrieval_hash,
            "path": MetadataValue.path(str(path)),
            "questions": len(table) + len(failed),
            "retrieved_questions": len(todo),
            "failed_questions": len(failed),
            "llm_calls": planner_calls,
            "llm_cache_hits": planner_hits,
            "mean_snippets": round(sum(len(r.context) for r in table.values()) / max(len(table), 1), 2),
            "seconds": round(time.perf_counter() - started, 3),
        },
        data_version=DataVersion(keys.retrieval),
    )


@asset(
    **COMMON,
    deps=[retrievals],
    kinds={"parquet", "python"},
    code_version=str(CONFIG_VERSION),
    description="Answers of runs 0..m-1 (seed = run), stored per run by generation hash.",
)
@lake_writer
def predictions(
    context: AssetExecutionContext, settings: KohakuSettings, models: ResourceParam[ModelPool]
) -> MaterializeResult:
    started = time.perf_counter()
    lake, cfg, keys = _partition(settings, context)
    questions = load_questions(cfg.questions)
    order = [q.id for q in questions]
    # Runs not stored need every question; stored runs with failed rows need those only.
    pending = st.pending_questions(lake, keys.prediction, cfg.voting.runs, order)
    todo = sorted(pending)
    hits = misses = 0
    fresh: dict[int, list[Prediction]] = {}
    if pending:
        chat = models.chat(cfg.generation.llm, lake)
        before = _calls(chat)
        # INFO with done/total and an ETA: a long step must not look frozen in the UI.
        fresh = st.answer_pending(
            lake,
            keys,
            cfg,
            questions,
            pending,
            models.retriever(lake, settings.index_config()),
            chat,
            progress=context.log.info,
        )
        after = _calls(chat)
        hits, misses = after[0] - before[0], after[1] - before[1]
    runs = [st.read_run(lake, keys.prediction, r) for r in range(cfg.voting.runs)]
    rows = [p for run in runs for p in run]
    failed = {p.question_id: p.error for p in rows if p.error}
    if failed:  # the good rows are stored (and reused); the failed questions are asked next time
        raise _failure(
            st.QuestionsFailed(failed, len(questions)),
            llm_calls=misses,
            llm_cache_hits=hits,
            key=keys.prediction,
        )
    return MaterializeResult(
        metadata={
            "reused": not todo,
            "computed_runs": MetadataValue.json(todo),
            "key": keys.prediction,
            "generation_hash": cfg.generation_hash,
            "runs": cfg.voting.runs,
            "rows": len(rows),
            "recomputed_questions": sum(len(ids) for ids in pending.values()),
            # Per question: which needed a new LLM reply (its context or settings changed), and
            # which were answered again from the response cache (everything the same).
            **_asked(fresh),
            "blank_rate": round(sum(p.answer.is_blank for p in rows) / max(len(rows), 1), 4),
            "mean_attempts": round(sum(p.attempts for p in rows) / max(len(rows), 1), 3),
            # Where the LLM's time went, per question (time_split.py).
            "time_split": MetadataValue.json(split.as_dict() if (split := time_split(runs)) else {}),
            "llm_calls": misses,
            "llm_cache_hits": hits,
            "seconds": round(time.perf_counter() - started, 3),
        },
        data_version=DataVersion(f"{keys.prediction}:{cfg.voting.runs}"),
    )


@asset(
    **COMMON,
    deps=[predictions],
    kinds={"parquet", "python"},
    code_version=str(CONFIG_VERSION),
    description="The m runs voted into one answer per question, stored by voting hash.",
    check_specs=[
        check_spec(
            "every_question_answered",
            "ensembles",
            "Every question of the question file has an answer row (an abstention counts).",
            configs,
        ),
        check_spec(
            "refs_within_corpus",
            "ensembles",
            "Every cited document id is an indexed document (WARN: scoring resolves near-misses).",
            configs,
        ),
    ],
)
@lake_writer
def ensembles(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    lake, cfg, keys = _partition(settings, context)
    path = st.ensemble_path(lake, keys.ensemble)
    # Stored runs can be repaired (failed rows asked again) under the same key: an ensemble
    # is reused only when voted from the run files as they are now.
    fingerprint = st.runs_fingerprint(lake, keys.prediction, cfg.voting.runs)
    reused = is_stored(path) and parquet_metadata(path).get("runs_fingerprint") == fingerprint
    if not reused:
        runs = [st.read_run(lake, keys.prediction, r) for r in range(cfg.voting.runs)]
        failed = {p.question_id: p.error for run in runs for p in run if p.error}
        if failed:  # never vote a failed call as if it were an answer
            raise _failure(st.QuestionsFailed(failed, len({p.question_id for run in runs for p in run})))
        st.write_rows(
            st.answer_rows(st.ensemble(runs, cfg)),
            path,
            {"voting_hash": cfg.voting_hash, "runs_fingerprint": fingerprint},
        )
    answers = st.read_answers(path)
    return MaterializeResult(
        check_results=answer_checks(cfg, answers, st.corpus_ids(lake)),
        metadata={
            "reused": reused,
            "key": keys.ensemble,
            "voting_hash": cfg.voting_hash,
            "path": MetadataValue.path(str(path)),
            "mode": cfg.voting.mode,
            "runs": cfg.voting.runs,
            "answers": len(answers),
            "blank": sum(a.is_blank for a in answers.values()),
        },
        data_version=DataVersion(keys.ensemble),
    )


@asset(
    **COMMON,
    deps=[ensembles],
    kinds={"parquet", "python"},
    code_version=str(CONFIG_VERSION),
    description="WattBot score of the ensemble (when the question file has gold answers).",
    check_specs=[
        check_spec("scores_in_range", "scores", "The final, value, ref and NA scores are each within [0, 1].", configs)
    ],
)
@lake_writer
def scores(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    lake, cfg, keys = _partition(settings, context)
    questions = load_questions(cfg.questions)
    metric = cfg.scoring.metric
    answers = st.read_answers(st.ensemble_path(lake, keys.ensemble))
    scored = score_answers(questions, answers, st.corpus_ids(lake), metric)
    path = st.score_path(lake, st.score_key(keys.ensemble, metric))
    if scored is None:
        write_parquet_atomic(pa.table({"id": pa.array([], pa.string())}), path)
        return MaterializeResult(
            check_results=[score_range_check({})],
            metadata={"scored": False, "reason": f"{cfg.questions} has no gold answers"},
            data_version=DataVersion(keys.ensemble),
        )
    report, rows = scored
    st.write_rows(rows, path, {"final": str(report.final), "metric": metric})
    parts = {"final": report.final, "value": report.value, "ref": report.ref, "na": report.na}
    return MaterializeResult(
        check_results=[score_range_check(parts)],
        metadata={
            "scored": True,
            "metric": metric,
            "final": round(report.final, 4),
            "value": round(report.value, 4),
            "ref": round(report.ref, 4),
            "na": round(report.na, 4),
            "ref_precision": round(report.ref_precision, 4),
            "ref_recall": round(report.ref_recall, 4),
            "false_answer_rate": report.false_answer_rate if report.false_answer_rate is not None else "n/a",
            "false_refusal_rate": report.false_refusal_rate if report.false_refusal_rate is not None else "n/a",
            "per_flag": MetadataValue.json({k: v.as_dict() for k, v in report.per_flag.items()}),
            "questions": len(rows),
            "per_type_accuracy": MetadataValue.json(per_type_accuracy(rows)),
            "errors": MetadataValue.json(report.error_counts()),
            "worst": MetadataValue.md(worst_table(rows)),
            "path": MetadataValue.path(str(path)),
        },
        data_version=DataVersion(f"{st.score_key(keys.ensemble, metric)}:{report.final:.6f}"),
    )


@asset(
    **COMMON,
    deps=[ensembles],
    kinds={"csv", "python"},
    code_version=str(CONFIG_VERSION),
    description=f"The ensemble as a WattBot submission CSV: `{lake_path('qa', 'submissions')}/CONFIG.csv` "
    "(CONFIG: the partition).",
)
@lake_writer
def submission(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    lake, cfg, keys = _partition(settings, context)
    name = context.partition_key
    questions = load_questions(cfg.questions)
    answers = st.read_answers(st.ensemble_path(lake, keys.ensemble))
    urls = ref_urls_for(settings.corpus, answers)
    path = write_submission_csv(st.submission_path(lake, name), questions, answers, urls)
    head = to_submission_rows(answers, questions[:5], urls)
    preview = "\n".join(
        ["| id | answer_value | answer_unit | ref_id |", "|---|---|---|---|"]
        + [f"| {r['id']} | {r['answer_value']} | {r['answer_unit']} | {r['ref_id']} |" for r in head]
    )
    return MaterializeResult(
        metadata={
            "path": MetadataValue.path(str(path)),
            "rows": len(questions),
            "blank": sum(1 for q in questions if q.id not in answers or answers[q.id].is_blank),
            "preview": MetadataValue.md(preview),
        },
        data_version=DataVersion(keys.ensemble),
    )


def answer_checks(cfg: QAConfig, answers: dict[str, Any], corpus: list[str]) -> list[AssetCheckResult]:
    """The ensemble's checks: no question left without a row; refs name indexed documents."""
    ids = [q.id for q in load_questions(cfg.questions)]
    missing = [i for i in ids if i not in answers]
    known = set(corpus)
    unknown = sorted({r for a in answers.values() if not a.is_blank for r in a.ref_id if r and r not in known})
    return [
        AssetCheckResult(
            check_name="every_question_answered",
            passed=not missing,
            severity=AssetCheckSeverity.ERROR,
            metadata={"questions": len(ids), "missing": len(missing), "missing_ids": MetadataValue.json(missing[:20])},
        ),
        AssetCheckResult(
            check_name="refs_within_corpus",
            passed=not unknown,
            severity=AssetCheckSeverity.WARN,
            metadata={"unknown_refs": MetadataValue.json(unknown[:20]), "indexed_documents": len(known)},
        ),
    ]


def retrieval_check(failed: dict[str, str], total: int) -> AssetCheckResult:
    """The questions whose retrieval failed (shown beside a partly failed materialization)."""
    return AssetCheckResult(
        check_name="every_question_retrieved",
        passed=not failed,
        severity=AssetCheckSeverity.ERROR,
        description=f"{len(failed)} of {total} retrievals failed; re-run to retry them" if failed else None,
        metadata={
            "questions": total,
            "failed_questions": len(failed),
            "failed": MetadataValue.json(dict(list(failed.items())[:20])),
        },
    )


def score_range_check(parts: dict[str, float]) -> AssetCheckResult:
    """Every score component within [0, 1] (nothing to check when there is no gold)."""
    outside = {k: v for k, v in parts.items() if not 0.0 <= v <= 1.0}
    return AssetCheckResult(
        check_name="scores_in_range",
        passed=not outside,
        metadata={"scored": bool(parts), "outside": MetadataValue.json(outside)},
    )


PER_CONFIG = [question_set, retrievals, predictions, ensembles, scores, submission]
