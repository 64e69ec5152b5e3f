"""Cross-config ensembles as assets, partitioned by ensemble spec file.

A spec (kohaku_rag.ensemble_spec) names several configs; its partition votes their stored
runs (or their own ensembles) into one answer per question and scores it. It reads the
members' predictions from the lake and never asks an LLM: a member with nothing stored
fails the partition with the command that computes it.
"""


import json
import time
from dataclasses import dataclass
from pathlib import Path

from dagster import (
    AddDynamicPartitionsRequest,
    AllPartitionMapping,
    AssetDep,
    AssetExecutionContext,
    DataVersion,
    DefaultSensorStatus,
    DeleteDynamicPartitionsRequest,
    DynamicPartitionsDefinition,
    Failure,
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

from kohaku_assets.qa import GROUP, config_of, configs_dir, ensembles, sensor_plan
from kohaku_assets.settings import KohakuSettings
from kohaku_rag import qa_store as st
from kohaku_rag.answer_types import Answer, load_questions
from kohaku_rag.config import stable_hash
from kohaku_rag.ensemble_spec import EnsembleSpec, ensemble_files, ensembles_dir, load_ensemble_spec
from kohaku_rag.lake import check_key
from kohaku_rag.qa_config import QAConfig

ensemble_specs = DynamicPartitionsDefinition(name="ensemble_specs")


def spec_of(settings: KohakuSettings, name: str) -> EnsembleSpec:
    folder = configs_dir(settings.lake)
    path = ensemble_files(folder).get(check_key(name))
    if path is None:
        raise ValueError(f"ensemble {name!r}: no {name}.toml or {name}.json in {ensembles_dir(folder)}")
    return load_ensemble_spec(path)


def members_of(settings: KohakuSettings, name: str, spec: EnsembleSpec) -> dict[str, QAConfig]:
    """The member configs, which must all answer the same question file (by content)."""
    members = {member: config_of(settings, member) for member in spec.configs}
    files = {member: st.file_sha(Path(cfg.questions)) for member, cfg in members.items()}
    if len(set(files.values())) > 1:
        listing = ", ".join(f"{m}: {members[m].questions}" for m in members)
        raise ValueError(f"ensemble {name}: its configs answer different question files ({listing})")
    return members


@dataclass(frozen=True)
class Pool:
    key: str  # the stored ensemble's key: the spec and every member's stored inputs
    voters: list[dict[str, Answer]]
    member_keys: dict[str, str]


def gather(settings: KohakuSettings, name: str, spec: EnsembleSpec, members: dict[str, QAConfig]) -> Pool:
    lake = settings.lake
    voters: list[dict[str, Answer]] = []
    member_keys: dict[str, str] = {}
    for member, cfg in members.items():
        keys = st.keys_for(lake, cfg)
        hint = f"materialize it first: kohaku eval --config {member} --questions {cfg.questions}"
        if spec.pool == "runs":
            missing = st.missing_runs(lake, keys.prediction, cfg.voting.runs)
            if missing:
                raise Failure(f"ensemble {name}: config {member} has no stored predictions for runs {missing}; {hint}")
            voters += [st.answers_of(st.read_run(lake, keys.prediction, r)) for r in range(cfg.voting.runs)]
            member_keys[member] = f"{keys.prediction}:{cfg.voting.runs}"
        else:
            path = st.ensemble_path(lake, keys.ensemble)
            if not path.exists():
                raise Failure(f"ensemble {name}: config {member} has no stored ensemble; {hint}")
            voters.append(st.read_answers(path))
            member_keys[member] = keys.ensemble
    return Pool(stable_hash([spec.spec_hash, member_keys]), voters, member_keys)


@asset(partitions_def=ensemble_specs, group_name=GROUP, code_version="1",
       deps=[AssetDep(ensembles, partition_mapping=AllPartitionMapping())],
       description="One vote over the runs (or ensembles) of the configs an ensemble spec names, and its score.")
def cross_ensemble(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    started = time.perf_counter()
    name = context.partition_key
    lake = settings.lake
    spec = spec_of(settings, name)
    members = members_of(settings, name, spec)
    pool = gather(settings, name, spec, members)
    path = st.ensemble_path(lake, pool.key)
    reused = path.exists()
    if not reused:
        answers = st.vote_pool(pool.voters, spec.mode, spec.ignore_blank, spec.tiebreak)
        st.write_rows(st.answer_rows(answers), path, {"spec_hash": spec.spec_hash})
    answers = st.read_answers(path)
    metadata: dict[str, object] = {
        "reused": reused, "key": pool.key, "path": str(path), "members": MetadataValue.json(pool.member_keys),
        "pool": spec.pool, "voters": len(pool.voters), "mode": spec.mode, "answers": len(answers),
        "blank": sum(a.is_blank for a in answers.values()),
    }
    questions = load_questions(next(iter(members.values())).questions)
    scored = st.score_answers(questions, answers, st.corpus_ids(lake))
    if scored is not None:
        report, rows = scored
        st.write_rows(rows, st.score_path(lake, pool.key), {"final": str(report.final)})
        metadata.update({
            "final": round(report.final, 4), "value": round(report.value, 4), "ref": round(report.ref, 4),
            "na": round(report.na, 4), "per_type_accuracy": MetadataValue.json(st.per_type_accuracy(rows)),
            "worst": MetadataValue.md(st.worst_table(rows)),
        })
    metadata["seconds"] = round(time.perf_counter() - started, 3)
    return MaterializeResult(metadata=metadata, data_version=DataVersion(pool.key))  # type: ignore[arg-type]


cross_ensemble_job = define_asset_job("vote_ensemble", selection=[cross_ensemble], partitions_def=ensemble_specs,
                                      description="Vote the stored runs of the configs an ensemble spec names.")


def ensemble_rows(settings: KohakuSettings) -> list[dict[str, object]]:
    """Leaderboard rows of every spec whose current ensemble has been scored."""
    import pyarrow.parquet as pq

    rows: list[dict[str, object]] = []
    for name, path in ensemble_files(configs_dir(settings.lake)).items():
        try:
            spec = load_ensemble_spec(path)
            members = members_of(settings, name, spec)
            pool = gather(settings, name, spec, members)
        except (ValueError, FileNotFoundError, Failure):
            continue  # a broken spec, or one whose members are not computed, has no score to list
        scored = st.score_path(settings.lake, pool.key)
        if not scored.exists() or pq.read_metadata(scored).num_rows == 0:
            continue
        table = pq.read_table(scored).to_pylist()
        n = len(table)
        first = next(iter(members.values()))
        rows.append({
            "config": name, "kind": "ensemble", "members": list(spec.configs), "questions_file": first.questions,
            "questions": n, "final": sum(r["total"] for r in table) / n, "value": sum(r["value"] for r in table) / n,
            "ref": sum(r["ref"] for r in table) / n, "na": sum(r["na"] for r in table) / n,
            "runs": len(pool.voters), "vote_mode": spec.mode, "voting_hash": pool.key,
            "config_json": json.dumps(spec.as_dict()),
        })
    return rows


@sensor(jobs=[cross_ensemble_job], minimum_interval_seconds=30, default_status=DefaultSensorStatus.STOPPED,
        description="Watches <configs>/ensembles: one partition per spec file; runs new and edited ones.")
def ensemble_specs_sensor(context: SensorEvaluationContext) -> SensorResult | SkipReason:
    folder = configs_dir(KohakuSettings().lake)
    registered = set(context.instance.get_dynamic_partitions(ensemble_specs.name))
    cursor = json.loads(context.cursor) if context.cursor else {}
    versions = {name: st.file_sha(path) for name, path in ensemble_files(folder).items()}
    add, delete, run = sensor_plan(versions, registered, cursor)
    if not (add or delete or run):
        return SkipReason(f"no ensemble spec in {ensembles_dir(folder)} changed")
    return SensorResult(
        run_requests=[RunRequest(run_key=f"{name}:{versions[name]}", partition_key=name, job_name=cross_ensemble_job.name)
                      for name in run],
        dynamic_partitions_requests=[
            *([AddDynamicPartitionsRequest(ensemble_specs.name, add)] if add else []),
            *([DeleteDynamicPartitionsRequest(ensemble_specs.name, delete)] if delete else []),
        ],
        cursor=json.dumps(versions, sort_keys=True),
    )


CROSS_ASSETS = [cross_ensemble]


def run_ensemble(settings: KohakuSettings, name: str) -> dict[str, object]:
    """Materialize one spec's partition (its members must be stored) and the leaderboard;
    returns the cross_ensemble materialization metadata."""
    from kohaku_assets.qa import QA_ASSETS, leaderboard, materialization_metadata
    from kohaku_assets.runner import QUIET, failure_message, instance_for

    spec_of(settings, name)  # a clear error for a missing or broken spec, before Dagster
    instance = instance_for(settings.lake.root)
    if not instance.has_dynamic_partition(ensemble_specs.name, name):
        instance.add_dynamic_partitions(ensemble_specs.name, [name])
    resources = {"settings": settings}
    result = materialize([*QA_ASSETS, cross_ensemble], selection=[cross_ensemble], partition_key=name, instance=instance,
                         resources=resources, raise_on_error=False, tags={"kohaku/trigger": "cli"}, run_config=QUIET)
    if not result.success:
        raise RuntimeError(f"ensemble {name}: {failure_message(result)}")
    board = materialize([*QA_ASSETS, cross_ensemble], selection=[leaderboard], instance=instance, resources=resources,
                        raise_on_error=False, tags={"kohaku/trigger": "cli"}, run_config=QUIET)
    if not board.success:
        raise RuntimeError(f"leaderboard: {failure_message(board)}")
    return materialization_metadata(result)["cross_ensemble"]
