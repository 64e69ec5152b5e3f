"""Cross-config ensembles as assets, partitioned by ensemble spec file.

A spec (kohaku_rag.answering.ensemble_spec) names several configs; its partition votes
their stored runs (or their own ensembles) into one answer per question and scores it,
never asking an LLM (kohaku_rag.answering.cross_ensemble).
"""

import time

from dagster import (
    AllPartitionMapping,
    AssetDep,
    AssetExecutionContext,
    DataVersion,
    Failure,
    MaterializeResult,
    MetadataValue,
    asset,
)

from kohaku_assets.assets.answering import ensembles
from kohaku_assets.partitions import ANSWERING_GROUP, ANSWERING_TAGS, OWNERS, ensemble_specs
from kohaku_assets.resources import KohakuSettings
from kohaku_assets.writer_lock import lake_writer
from kohaku_rag.answering import qa_tables as st
from kohaku_rag.answering.config_folder import spec_of
from kohaku_rag.answering.cross_ensemble import gather, members_of, vote_spec
from kohaku_rag.answers.question_files import load_questions
from kohaku_rag.errors import MissingPredictions
from kohaku_rag.evaluation.scoring import per_type_accuracy, score_answers, worst_table


@asset(
    partitions_def=ensemble_specs,
    group_name=ANSWERING_GROUP,
    owners=OWNERS,
    tags=ANSWERING_TAGS,
    kinds={"parquet", "python"},
    code_version="1",
    deps=[AssetDep(ensembles, partition_mapping=AllPartitionMapping())],
    description="One vote over the runs (or ensembles) of the configs an ensemble spec names, and its score.",
)
@lake_writer
def cross_ensemble(context: AssetExecutionContext, settings: KohakuSettings) -> MaterializeResult:
    started = time.perf_counter()
    name, lake = context.partition_key, settings.lake
    spec = spec_of(lake, name)
    members = members_of(lake, name, spec)
    try:
        pool = gather(lake, name, spec, members)
    except MissingPredictions as exc:
        raise Failure(str(exc)) from exc
    answers, reused = vote_spec(lake, spec, pool)
    metadata: dict[str, object] = {
        "reused": reused,
        "key": pool.key,
        "path": MetadataValue.path(str(st.ensemble_path(lake, pool.key))),
        "members": MetadataValue.json(pool.member_keys),
        "pool": spec.pool,
        "voters": len(pool.voters),
        "mode": spec.mode,
        "answers": len(answers),
        "blank": sum(a.is_blank for a in answers.values()),
    }
    first = next(iter(members.values()))
    metric = first.scoring.metric  # the first member config's choice
    questions = load_questions(first.questions)
    scored = score_answers(questions, answers, st.corpus_ids(lake), metric)
    if scored is not None:
        report, rows = scored
        st.write_rows(rows, st.score_path(lake, st.score_key(pool.key, metric)), {"final": str(report.final)})
        metadata.update(
            {
                "metric": metric,
                "final": round(report.final, 4),
                "value": round(report.value, 4),
                "ref": round(report.ref, 4),
                "na": round(report.na, 4),
                "per_type_accuracy": MetadataValue.json(per_type_accuracy(rows)),
                "worst": MetadataValue.md(worst_table(rows)),
            }
        )
    metadata["seconds"] = round(time.perf_counter() - started, 3)
    return MaterializeResult(metadata=metadata, data_version=DataVersion(pool.key))  # type: ignore[arg-type]
