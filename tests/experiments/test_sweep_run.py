"""A 2×2 sweep × 2 seeds through `kohaku sweep` / `kohaku report`, real Dagster runs and a
real OpenAI-compatible server: members registered, shared retrievals computed once, seed
statistics on hand-computed numbers, no LLM call repeated, the report's table and plots."""

import json
import logging
import math
import re

import duckdb
from dagster import AssetKey, RunsFilter
from dagster._core.event_api import AssetRecordsFilter

from kohaku_assets.cli import main as cli_main
from kohaku_assets.instance import instance_for
from kohaku_rag.answering import qa_tables as st
from kohaku_rag.experiments.sweep import sweeps_dir
from tests.support.qa_server import response_schema

SWEEP = """base = "base"
seeds = 2
[grid]
top_k_final = [4, 8]
"generation.temperature" = [0.2, 0.7]
"""
MEMBERS = [
    "grid--top_k_final-4--temperature-0.2",
    "grid--top_k_final-4--temperature-0.7",
    "grid--top_k_final-8--temperature-0.2",
    "grid--top_k_final-8--temperature-0.7",
]


def _json_out(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _metadata(instance, asset: str, partition: str) -> dict:
    (record,) = instance.fetch_materializations(
        AssetRecordsFilter(asset_key=AssetKey(asset), asset_partitions=[partition]), limit=1
    ).records
    return {k: v.value for k, v in record.asset_materialization.metadata.items()}


def test_sweep_members_seeds_report_and_no_repeated_call(env, capsys, tmp_path):
    settings, server, _questions = env
    server.wrong_seeds = {1}  # run 1 (seed 1) answers 999 W to the watts question
    sweeps_dir(settings.lake).mkdir(parents=True)
    (sweeps_dir(settings.lake) / "grid.toml").write_text(SWEEP)

    assert cli_main(["sweep", "grid", "--estimate-only"]) == 0
    est = _json_out(capsys)["estimate"]
    # 4 prediction tables × 2 runs × 3 questions; the planner once per question (2 retrieval
    # tables differ only in top_k_final: the same planner requests).
    assert (est["answers_missing"], est["planner_calls"], est["calls"]) == (24, 3, 27)
    assert server.requests == []

    assert cli_main(["sweep", "grid", "--json"]) == 0
    out = _json_out(capsys)
    assert out["members"] == MEMBERS and out["failed"] == {}
    instance = instance_for(settings.lake.root)
    assert set(MEMBERS) <= set(instance.get_dynamic_partitions("configs"))
    assert instance.get_dynamic_partitions("sweeps") == ["grid"]

    kinds = server.kinds()
    assert kinds["planner"] == 3  # shared across the two retrieval tables (cache)
    # Retrievals computed once per retrieval table: the second member of each reuses it.
    reused = {m: _metadata(instance, "retrievals", m)["reused"] for m in MEMBERS}
    assert reused == {MEMBERS[0]: False, MEMBERS[1]: True, MEMBERS[2]: False, MEMBERS[3]: True}
    assert len(list((st.qa_dir(settings.lake) / "retrievals").glob("*.parquet"))) == 2
    # No LLM request was ever sent twice.
    bodies = [json.dumps(r.body, sort_keys=True) for r in server.requests]
    assert len(bodies) == len(set(bodies))
    # Every answer right first time (1 call each), plus the planner's 3: the estimate, exactly.
    assert out["calls"] == kinds["answer"] + kinds["planner"] == est["calls"] == len(server.requests)

    board = st.leaderboard_path(settings.lake)
    rows = {
        r[0]: r[1:]
        for r in duckdb.sql(
            f"select config, final, run_finals, final_mean, final_sd, ensemble_curve, seeds, llm_calls_made, "
            f"significant_vs_best from '{board}'"
        ).fetchall()
    }
    # Run 0 answers all 3 right (1.0 each); run 1 gets the watts value wrong but cites the
    # right document (0.15 ref + 0.10 not-NA = 0.25): (2 + 0.25) / 3. The vote of the two
    # ties on that question and keeps run 0's answer: 1.0.
    f0, f1 = 1.0, (2 + 0.25) / 3
    for name in MEMBERS:
        final, finals, mean, sd, curve, seeds, calls, significant = rows[name]
        assert finals == [f0, f1] and seeds == 2 and calls == 6
        assert math.isclose(mean, (f0 + f1) / 2) and math.isclose(sd, abs(f0 - f1) / math.sqrt(2))
        assert curve == [mean, 1.0] and final == 1.0 and significant is False

    # After: nothing is missing, and the estimate's rates are measured (from the stored
    # predictions and the response cache's timings of this model).
    assert cli_main(["sweep", "grid", "--estimate-only"]) == 0
    after = _json_out(capsys)["estimate"]
    assert (after["answers_missing"], after["planner_calls"], after["calls"]) == (0, 0, 0)
    assert after["calls_per_answer_measured"] and after["calls_per_answer"] == 1.0
    assert after["seconds_per_call"] is not None and after["seconds_per_call"] > 0

    # A run file lost: its 3 answers are missing, but the cache holds their requests.
    from kohaku_rag.answering.config_folder import config_of

    st.run_path(settings.lake, st.keys_for(settings.lake, config_of(settings.lake, MEMBERS[0])).prediction, 1).unlink()
    assert cli_main(["sweep", "grid", "--estimate-only"]) == 0
    lost = _json_out(capsys)["estimate"]
    assert (lost["answers_missing"], lost["answers_cached"], lost["calls"]) == (3, 3, 0)

    # A second sweep asks nothing: every member is stored (the lost run comes from the cache).
    sent = len(server.requests)
    assert cli_main(["sweep", "grid", "--json"]) == 0
    again = _json_out(capsys)
    assert len(server.requests) == sent and again["calls"] == 0 and again["cache_hits"] == 3
    assert [_metadata(instance, "predictions", m)["reused"] for m in MEMBERS] == [False, True, True, True]

    report_meta = _metadata(instance, "sweep_report", "grid")
    assert report_meta["scored"] == 4 and len(report_meta["table"].records) == 4
    assert report_meta["plots"].count("data:image/png;base64,") == 5  # 2 keys, curve, types, errors

    out_md = tmp_path / "out" / "report.md"
    assert cli_main(["report", "grid", "--out", str(out_md)]) == 0
    text = out_md.read_text()
    assert all(f"| {m} |" in text for m in MEMBERS)
    assert "0.875 ± 0.177" in text  # (1 + 0.75) / 2 ± 0.25 / sqrt(2)
    pngs = sorted(p.name for p in out_md.parent.glob("*.png"))
    assert pngs == sorted(
        [
            "score_vs_retrieval_top_k_final.png",
            "score_vs_generation_temperature.png",
            "ensemble_curve.png",
            "type_accuracy.png",
            "error_types.png",
        ]
    )
    assert all((out_md.parent / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert cli_main(["report", "grid"]) == 0
    html = (st.qa_dir(settings.lake) / "reports" / "grid" / "report.html").read_text()
    assert html.count("<img") == 5 and "grid--top_k_final-8--temperature-0.7" in html
    capsys.readouterr()


def test_changed_document_asks_only_questions_whose_context_changed(env, capsys):
    settings, server, questions = env
    folder = settings.lake.root / "configs"
    base = json.loads((folder / "base.json").read_text())
    base["retrieval"].update(use_planner=False, top_k_final=1)
    (folder / "narrow.json").write_text(json.dumps(base))
    assert cli_main(["eval", "--questions", str(questions), "--config", "narrow", "--json"]) == 0
    instance = instance_for(settings.lake.root)
    first = _metadata(instance, "predictions", "narrow")
    assert first["questions_asked_llm"] == 3 and first["questions_from_cache"] == 0
    # The step's progress is in the run's log at INFO, with done / total and an ETA.
    (run,) = instance.get_runs(filters=RunsFilter(tags={"dagster/partition": "narrow"}), limit=1)
    lines = [e.user_message for e in instance.all_logs(run.run_id) if e.level == logging.INFO]
    assert any(re.match(r"answered 1/3 q1: \['4.3'\] \(ETA \d+s\)", line) for line in lines), lines
    assert any(line.startswith("answered 3/3 q3") and "(done in" in line for line in lines)
    before = st.read_retrievals(st.retrieval_path(settings.lake, st.keys_for(settings.lake, _cfg(settings)).retrieval))

    water = settings.corpus / "water.md"
    water.write_text(water.read_text().replace("The water usage", "As measured, the water usage"))
    assert cli_main(["index", "--json"]) == 0
    sent = len(server.requests)
    assert cli_main(["eval", "--questions", str(questions), "--config", "narrow", "--json"]) == 0
    after = st.read_retrievals(st.retrieval_path(settings.lake, st.keys_for(settings.lake, _cfg(settings)).retrieval))
    changed = sorted(q for q in after if after[q].context != before[q].context)
    second = _metadata(instance, "predictions", "narrow")
    asked = [r for r in server.requests[sent:] if "ref_id" in response_schema(r.body)["properties"]]
    assert changed == ["q3"]  # the water question's snippet is the edited sentence; the others' are elsewhere
    assert second["recomputed_questions"] == 3  # a new index: every question is answered again...
    assert second["questions_asked_llm"] == len(changed) == len(asked)  # ...the LLM asked for the changed one
    assert second["questions_from_cache"] == 3 - len(changed)
    assert sorted(second["asked_llm_ids"]) == changed
    capsys.readouterr()


def _cfg(settings):
    from kohaku_rag.answering.config_folder import config_of

    return config_of(settings.lake, "narrow")


def test_backfill_and_sensor_register_and_request_the_members(env, capsys):
    settings, server, _questions = env
    from dagster import build_sensor_context

    from kohaku_assets.runner import resources_for
    from kohaku_assets.sensors import configs_sensor, sweeps_sensor

    sweeps_dir(settings.lake).mkdir(parents=True)
    (sweeps_dir(settings.lake) / "grid.toml").write_text(SWEEP)
    instance = instance_for(settings.lake.root)
    result = sweeps_sensor(build_sensor_context(resources=resources_for(settings), instance=instance))
    assert sorted(r.partition_key for r in result.run_requests) == MEMBERS
    assert {r.job_name for r in result.run_requests} == {"answer_config"}
    added = {r.partitions_def_name: r.partition_keys for r in result.dynamic_partitions_requests}
    assert added == {"sweeps": ["grid"], "configs": MEMBERS}
    for request in result.dynamic_partitions_requests:  # what the daemon applies
        instance.add_dynamic_partitions(request.partitions_def_name, request.partition_keys)
    # The configs sensor registers the member files too, but leaves their runs to the sweep's sensor.
    on_earlier = '{"versions": {}, "started": null}'  # turned on while the folder was empty
    configs = configs_sensor(
        build_sensor_context(resources=resources_for(settings), instance=instance, cursor=on_earlier)
    )
    assert sorted(r.partition_key for r in configs.run_requests) == ["base", "default"]
    assert [r.partition_keys for r in configs.dynamic_partitions_requests] == [["base"]]  # members kept
    # Unchanged on the next tick: nothing to do.
    again = sweeps_sensor(
        build_sensor_context(resources=resources_for(settings), instance=instance, cursor=result.cursor)
    )
    assert "no sweep changed" in str(again)

    assert cli_main(["sweep", "grid", "--backfill"]) == 0
    out = _json_out(capsys)
    (backfill,) = instance.get_backfills()
    assert backfill.backfill_id == out["backfill"] and backfill.tags["kohaku/sweep"] == "grid"
    targeted = backfill.asset_backfill_data.target_subset.iterate_asset_partitions()
    by_asset: dict[str, set[str]] = {}
    for key in targeted:
        by_asset.setdefault(key.asset_key.to_user_string(), set()).add(key.partition_key)
    assert by_asset == {
        a: set(MEMBERS) for a in ("question_set", "retrievals", "predictions", "ensembles", "scores", "submission")
    }
    assert server.requests == []  # submitted for the UI's daemon; nothing ran here


def test_leaderboard_marks_a_significant_difference(env, capsys):
    settings, server, questions = env
    server.wrong_at_temperature = 0.9  # every answer at this temperature is 999: wrong on each question
    folder = settings.lake.root / "configs"
    base = json.loads((folder / "base.json").read_text())
    for name, temperature in (("cool", 0.3), ("hot", 0.9)):
        data = {**base, "generation": {**base["generation"], "temperature": temperature}}
        (folder / f"{name}.json").write_text(json.dumps(data))
        assert cli_main(["eval", "--questions", str(questions), "--config", name, "--json"]) == 0
    capsys.readouterr()
    from kohaku_rag.evaluation.leaderboard import leaderboard_markdown, leaderboard_rows

    rows = {r["config"]: r for r in leaderboard_rows(settings.lake)}
    cool, hot = rows["cool"], rows["hot"]
    assert cool["final"] == 1.0 and hot["final"] == 0.25 and hot["best_config"] in ("cool", "base")
    # Every question loses 0.75: the paired interval is that difference exactly, far from 0.
    assert hot["diff_vs_best"] == -0.75 and hot["ci_low"] == hot["ci_high"] == -0.75 and hot["significant_vs_best"]
    assert not cool["significant_vs_best"]
    table = leaderboard_markdown(list(rows.values()))
    assert "| hot | 0.250 |" in table and "-0.750 [-0.750, -0.750] *" in table
