"""Answering assets, partitioned by configuration file.

A folder of config files (default `<lake>/configs`, env KOHAKU_CONFIGS) defines the
`configs` dynamic partitions; `configs_sensor` adds and removes them as files appear and
go, and requests a run for each new or edited file. Every asset stores its table under the
hash of what made it (kohaku_rag.qa_store), so materializing an edited config recomputes
only the parts its edit changed; the others report `reused`.
"""


import json
import os
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pyarrow as pa
from dagster import (
    AddDynamicPartitionsRequest,
    AssetExecutionContext,
    AssetKey,
    AutomationCondition,
    DataVersion,
    DefaultSensorStatus,
    DeleteDynamicPartitionsRequest,
    DynamicPartitionsDefinition,
    MaterializeResult,
    MetadataValue,
    RunRequest,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    asset,
    define_asset_job,
    materialize,
    sensor,
)

from kohaku_assets.settings import KohakuSettings
from kohaku_rag import qa_store as st
from kohaku_rag.answer_types import load_questions
from kohaku_rag.config import IndexConfig
from kohaku_rag.lake import Lake, check_key, write_parquet_atomic
from kohaku_rag.llm import ChatModel, LLMSpec, make_chat_model
from kohaku_rag.qa_config import QAConfig, config_files, load_qa_config
from kohaku_rag.retrieve import Retriever
from kohaku_rag.search import open_retriever

GROUP = "answering"
configs = DynamicPartitionsDefinition(name="configs")


def configs_dir(lake: Lake) -> Path:
    return Path(os.environ.get("KOHAKU_CONFIGS") or lake.root / "configs")


def config_of(settings: KohakuSettings, name: str) -> QAConfig:
    path = config_files(configs_dir(settings.lake)).get(check_key(name))
    if path is None:
        raise ValueError(f"config {name!r}: no {name}.toml or {name}.json in {configs_dir(settings.lake)}")
    return load_qa_config(path)


@lru_cache(maxsize=4)
def _chat(spec: LLMSpec, lake_root: str) -> ChatModel:
    # One model per process: the embedded LLM takes seconds to load.
    return make_chat_model(spec, Path(lake_root))


@lru_cache(maxsize=2)
def _retriever(lake_root: str, index_cfg: IndexConfig) -> Retriever:
    return open_retriever(Lake(Path(lake_root)), index_cfg)


def _chat_for(settings: KohakuSettings, cfg: QAConfig) -> ChatModel:
    return _chat(cfg.generation.llm, str(settings.lake.root))


def _calls(chat: ChatModel) -> tuple[int, int]:
    return getattr(chat, "hits", 0), getattr(chat, "misses", 0)


@asset(partitions_def=configs, group_name=GROUP, code_version="1",
       description="The config's WattBot-format question file (its path is part of the config).")
def question_set(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    cfg = config_of(settings, context.partition_key)
    questions = load_questions(cfg.questions)
    sha = st.file_sha(Path(cfg.questions))
    return MaterializeResult(
        metadata={"path": cfg.questions, "questions": len(questions), "with_gold": sum(q.gold is not None for q in questions),
                  "content_hash": sha},
        data_version=DataVersion(sha),
    )


@asset(partitions_def=configs, group_name=GROUP, deps=[question_set], code_version="1",
       description="Planned queries and retrieved context per question, stored by retrieval hash.")
def retrievals(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    started = time.perf_counter()
    lake = settings.lake
    cfg = config_of(settings, context.partition_key)
    keys = st.keys_for(lake, cfg)
    path = st.retrieval_path(lake, keys.retrieval)
    reused = path.exists()
    if not reused:
        questions = load_questions(cfg.questions)
        chat = _chat_for(settings, cfg) if cfg.retrieval.use_planner else None
        rows = st.compute_retrievals(questions, cfg, _retriever(str(lake.root), settings.index_config()), chat,
                                     progress=context.log.debug)
        st.write_rows(rows, path, {"retrieval_hash": cfg.retrieval_hash})
    table = st.read_retrievals(path)
    return MaterializeResult(
        metadata={"reused": reused, "key": keys.retrieval, "retrieval_hash": cfg.retrieval_hash, "path": str(path),
                  "questions": len(table), "mean_snippets": round(sum(len(r.context) for r in table.values()) / max(len(table), 1), 2),
                  "seconds": round(time.perf_counter() - started, 3)},
        data_version=DataVersion(keys.retrieval),
    )


@asset(partitions_def=configs, group_name=GROUP, deps=[retrievals], code_version="1",
       description="Answers of runs 0..m-1 (seed = run), stored per run by generation hash.")
def predictions(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    started = time.perf_counter()
    lake = settings.lake
    cfg = config_of(settings, context.partition_key)
    keys = st.keys_for(lake, cfg)
    todo = st.missing_runs(lake, keys.prediction, cfg.voting.runs)
    hits = misses = 0
    if todo:
        questions = load_questions(cfg.questions)
        chat = _chat_for(settings, cfg)
        before = _calls(chat)
        retrieved = st.read_retrievals(st.retrieval_path(lake, keys.retrieval))
        computed = st.compute_runs(questions, retrieved, cfg, _retriever(str(lake.root), settings.index_config()),
                                   chat, todo, progress=context.log.debug, images=lambda h: lake.blob(h).read_bytes())
        for run, preds in computed.items():
            st.write_rows([p.as_row() for p in preds], st.run_path(lake, keys.prediction, run),
                          {"generation_hash": cfg.generation_hash, "run": str(run)})
        after = _calls(chat)
        hits, misses = after[0] - before[0], after[1] - before[1]
    runs = [st.read_run(lake, keys.prediction, r) for r in range(cfg.voting.runs)]
    rows = [p for run in runs for p in run]
    return MaterializeResult(
        metadata={"reused": not todo, "computed_runs": MetadataValue.json(todo), "key": keys.prediction,
                  "generation_hash": cfg.generation_hash, "runs": cfg.voting.runs, "rows": len(rows),
                  "blank_rate": round(sum(p.answer.is_blank for p in rows) / max(len(rows), 1), 4),
                  "mean_attempts": round(sum(p.attempts for p in rows) / max(len(rows), 1), 3),
                  "llm_calls": misses, "llm_cache_hits": hits,
                  "seconds": round(time.perf_counter() - started, 3)},
        data_version=DataVersion(f"{keys.prediction}:{cfg.voting.runs}"),
    )


@asset(partitions_def=configs, group_name=GROUP, deps=[predictions], code_version="1",
       description="The m runs voted into one answer per question, stored by voting hash.")
def ensembles(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    lake = settings.lake
    cfg = config_of(settings, context.partition_key)
    keys = st.keys_for(lake, cfg)
    path = st.ensemble_path(lake, keys.ensemble)
    reused = path.exists()
    if not reused:
        runs = [st.read_run(lake, keys.prediction, r) for r in range(cfg.voting.runs)]
        st.write_rows(st.answer_rows(st.ensemble(runs, cfg)), path, {"voting_hash": cfg.voting_hash})
    answers = st.read_answers(path)
    return MaterializeResult(
        metadata={"reused": reused, "key": keys.ensemble, "voting_hash": cfg.voting_hash, "path": str(path),
                  "mode": cfg.voting.mode, "runs": cfg.voting.runs, "answers": len(answers),
                  "blank": sum(a.is_blank for a in answers.values())},
        data_version=DataVersion(keys.ensemble),
    )


@asset(partitions_def=configs, group_name=GROUP, deps=[ensembles], code_version="1",
       description="WattBot score of the ensemble (when the question file has gold answers).")
def scores(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    lake = settings.lake
    cfg = config_of(settings, context.partition_key)
    keys = st.keys_for(lake, cfg)
    questions = load_questions(cfg.questions)
    scored = st.score_answers(questions, st.read_answers(st.ensemble_path(lake, keys.ensemble)), st.corpus_ids(lake))
    path = st.score_path(lake, keys.ensemble)
    if scored is None:
        write_parquet_atomic(pa.table({"id": pa.array([], pa.string())}), path)
        return MaterializeResult(metadata={"scored": False, "reason": f"{cfg.questions} has no gold answers"},
                                 data_version=DataVersion(keys.ensemble))
    report, rows = scored
    st.write_rows(rows, path, {"final": str(report.final)})
    return MaterializeResult(
        metadata={"scored": True, "final": round(report.final, 4), "value": round(report.value, 4),
                  "ref": round(report.ref, 4), "na": round(report.na, 4), "questions": len(rows),
                  "per_type_accuracy": MetadataValue.json(st.per_type_accuracy(rows)),
                  "errors": MetadataValue.json(report.error_counts()),
                  "worst": MetadataValue.md(st.worst_table(rows)), "path": str(path)},
        data_version=DataVersion(f"{keys.ensemble}:{report.final:.6f}"),
    )


def ref_urls_for(settings: KohakuSettings, answers: dict) -> dict[str, str] | None:  # type: ignore[type-arg]
    """Document URLs from the corpus metadata.csv, when it lists every cited document
    (otherwise the submission's ref_url column says is_blank)."""
    from kohaku_rag.score import load_ref_urls

    path = settings.corpus / "metadata.csv"
    if not path.exists():
        return None
    urls = load_ref_urls(path)
    cited = {r.lower() for a in answers.values() for r in a.ref_id}
    return urls if cited <= set(urls) else None


@asset(partitions_def=configs, group_name=GROUP, deps=[ensembles], code_version="1",
       description="The ensemble as a WattBot submission CSV: <lake>/qa/submissions/<config>.csv.")
def submission(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    from kohaku_rag.score import to_submission_rows, write_submission_csv

    lake, name = settings.lake, context.partition_key
    cfg = config_of(settings, name)
    keys = st.keys_for(lake, cfg)
    questions = load_questions(cfg.questions)
    answers = st.read_answers(st.ensemble_path(lake, keys.ensemble))
    urls = ref_urls_for(settings, answers)
    path = write_submission_csv(st.submission_path(lake, name), questions, answers, urls)
    head = to_submission_rows(answers, questions[:5], urls)
    preview = "\n".join(["| id | answer_value | answer_unit | ref_id |", "|---|---|---|---|"]
                        + [f"| {r['id']} | {r['answer_value']} | {r['answer_unit']} | {r['ref_id']} |" for r in head])
    return MaterializeResult(
        metadata={"path": str(path), "rows": len(questions), "blank": sum(1 for q in questions if q.id not in answers
                                                                          or answers[q.id].is_blank),
                  "preview": MetadataValue.md(preview)},
        data_version=DataVersion(keys.ensemble),
    )


def leaderboard_rows(settings: KohakuSettings) -> list[dict[str, object]]:
    import pyarrow.parquet as pq

    lake = settings.lake
    rows: list[dict[str, object]] = []
    for name, path in config_files(configs_dir(lake)).items():
        try:
            cfg = load_qa_config(path)
            keys = st.keys_for(lake, cfg)
        except (ValueError, FileNotFoundError):
            continue  # a broken or unrunnable config has no score to list
        scored = st.score_path(lake, keys.ensemble)
        if not scored.exists() or pq.read_metadata(scored).num_rows == 0:
            continue
        table = pq.read_table(scored).to_pylist()
        n = len(table)
        preds = [p for r in range(cfg.voting.runs) if st.run_path(lake, keys.prediction, r).exists()
                 for p in st.read_run(lake, keys.prediction, r)]
        rows.append({
            "config": name, "kind": "config", "members": [name], "questions_file": cfg.questions, "questions": n,
            "final": sum(r["total"] for r in table) / n, "value": sum(r["value"] for r in table) / n,
            "ref": sum(r["ref"] for r in table) / n, "na": sum(r["na"] for r in table) / n,
            "runs": cfg.voting.runs, "vote_mode": cfg.voting.mode, "temperature": cfg.generation.temperature,
            "model": cfg.generation.llm.model, "top_k_final": cfg.retrieval.search.top_k_final,
            "budget_chars": cfg.retrieval.search.budget_chars, "use_planner": cfg.retrieval.use_planner,
            "llm_seconds_per_question": sum(p.seconds for p in preds) / n if n else 0.0,
            "retrieval_hash": cfg.retrieval_hash, "generation_hash": cfg.generation_hash,
            "voting_hash": cfg.voting_hash, "config_json": json.dumps(cfg.as_dict(), default=str),
        })
    from kohaku_assets.cross_ensembles import ensemble_rows

    rows += ensemble_rows(settings)
    columns = list(dict.fromkeys(k for row in rows for k in row))  # configs and ensembles share one schema
    rows = [{k: row.get(k) for k in columns} for row in rows]
    return sorted(rows, key=lambda r: -float(r["final"]))  # type: ignore[arg-type]


@asset(group_name=GROUP, deps=[scores, AssetKey("cross_ensemble")], code_version="1",
       automation_condition=AutomationCondition.eager(),
       description="Every scored config and ensemble in one Parquet table: duckdb -c \"from '<lake>/qa/leaderboard.parquet'\".")
def leaderboard(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    rows = leaderboard_rows(settings)
    path = st.leaderboard_path(settings.lake)
    write_parquet_atomic(pa.Table.from_pylist(rows) if rows else pa.table({"config": pa.array([], pa.string())}), path)
    top = "\n".join(["| config | final | value | ref | na | runs |", "|---|---|---|---|---|---|"]
                    + [f"| {r['config']} | {r['final']:.3f} | {r['value']:.3f} | {r['ref']:.3f} | {r['na']:.3f} | {r['runs']} |"
                       for r in rows[:20]])
    return MaterializeResult(metadata={"configs": len(rows), "path": str(path), "table": MetadataValue.md(top)})


PER_CONFIG = [question_set, retrievals, predictions, ensembles, scores, submission]
QA_ASSETS = [*PER_CONFIG, leaderboard]
answer_config_job = define_asset_job("answer_config", selection=PER_CONFIG, partitions_def=configs,
                                     description="Questions → retrievals → predictions → ensembles → scores and submission CSV of one config.")


def config_versions(folder: Path) -> dict[str, str]:
    """name -> content hash of every config file in the folder."""
    return {name: st.file_sha(path) for name, path in config_files(folder).items()}


def sensor_plan(versions: dict[str, str], registered: set[str], cursor: dict[str, str]) -> tuple[list[str], list[str], list[str]]:
    """(partitions to add, to delete, names to run) for files whose content hashes are `versions`;
    `cursor` holds each file's hash when it was last requested."""
    add = sorted(set(versions) - registered)
    delete = sorted(registered - set(versions))
    run = sorted(name for name, sha in versions.items() if cursor.get(name) != sha)
    return add, delete, run


@sensor(jobs=[answer_config_job], minimum_interval_seconds=30, default_status=DefaultSensorStatus.STOPPED,
        description="Watches the configs folder: one partition per config file; runs new and edited ones.")
def configs_sensor(context: SensorEvaluationContext) -> SensorResult | SkipReason:
    folder = configs_dir(KohakuSettings().lake)  # KOHAKU_LAKE / KOHAKU_CONFIGS, read at each tick
    registered = set(context.instance.get_dynamic_partitions(configs.name))
    # The cursor holds each file's content hash when it was last requested.
    cursor = json.loads(context.cursor) if context.cursor else {}
    versions = config_versions(folder)
    add, delete, run = sensor_plan(versions, registered, cursor)
    if not (add or delete or run):
        return SkipReason(f"no config in {folder} changed")
    return SensorResult(
        run_requests=[RunRequest(run_key=f"{name}:{versions[name]}", partition_key=name, job_name=answer_config_job.name)
                      for name in run],
        dynamic_partitions_requests=[
            *([AddDynamicPartitionsRequest(configs.name, add)] if add else []),
            *([DeleteDynamicPartitionsRequest(configs.name, delete)] if delete else []),
        ],
        cursor=json.dumps(versions, sort_keys=True),
    )


# ── in-process runs (CLI, tests) ──────────────────────────────────────────


@dataclass(frozen=True)
class QAReport:
    config: str
    keys: st.QAKeys
    metadata: dict[str, dict[str, object]]  # asset name -> its materialization metadata
    seconds: float


def run_config(settings: KohakuSettings, name: str, *, leaderboard_too: bool = True) -> QAReport:
    """Materialize one config's partition (what is stored is reused) and the leaderboard."""
    from kohaku_assets.runner import QUIET, failure_message, instance_for

    started = time.perf_counter()
    cfg = config_of(settings, name)
    instance = instance_for(settings.lake.root)
    if not instance.has_dynamic_partition(configs.name, name):
        instance.add_dynamic_partitions(configs.name, [name])
    resources = {"settings": settings}
    result = materialize(QA_ASSETS, selection=PER_CONFIG, partition_key=name, instance=instance, resources=resources,
                         raise_on_error=False, tags={"kohaku/trigger": "cli"}, run_config=QUIET)
    if not result.success:
        raise RuntimeError(f"config {name}: {failure_message(result)}")
    metadata = materialization_metadata(result)
    if leaderboard_too:
        board = materialize(QA_ASSETS, selection=[leaderboard], instance=instance, resources=resources,
                            raise_on_error=False, tags={"kohaku/trigger": "cli"}, run_config=QUIET)
        if not board.success:
            raise RuntimeError(f"leaderboard: {failure_message(board)}")
    return QAReport(name, st.keys_for(settings.lake, cfg), metadata, time.perf_counter() - started)


def materialization_metadata(result) -> dict[str, dict[str, object]]:  # type: ignore[no-untyped-def]
    out: dict[str, dict[str, object]] = {}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization  # type: ignore[union-attr]
        out[mat.asset_key.to_user_string()] = {k: v.value for k, v in mat.metadata.items()}
    return out
