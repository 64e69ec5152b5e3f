"""The asset graph as a Dagster user reads it: answers downstream of the indexes (stale after
a re-index, with nothing re-run by itself), the leaderboard naming its index, folder sensors
that run only what changed after they were turned on, descriptions with the real lake path."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from dagster import AssetKey, build_sensor_context, evaluate_automation_conditions
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus
from dagster._time import get_current_datetime

from kohaku_assets.definitions import defs
from kohaku_assets.instance import instance_for
from kohaku_assets.resources import KohakuSettings, lake_path
from kohaku_assets.runner import resources_for, run_config, run_index
from kohaku_assets.sensors import configs_sensor, ensemble_specs_sensor
from kohaku_rag.answering import qa_tables as st
from tests.support.corpus_docs import DOCS, indexed_corpus
from tests.support.qa_server import QAServer, qa_lake

ANSWERING = ["retrievals", "predictions", "ensembles", "scores", "submission"]


def quiet(_msg: str) -> None:
    pass


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return indexed_corpus(tmp_path_factory.mktemp("graph"))


@pytest.fixture()
def env(built, tmp_path, monkeypatch):
    settings, questions = qa_lake(built, tmp_path, monkeypatch, copy_corpus=True)
    with QAServer() as server:
        yield settings, server, questions


def write_config(settings: KohakuSettings, name: str, server: QAServer, questions) -> None:
    folder = settings.lake.root / "configs"
    folder.mkdir(exist_ok=True)
    llm = {"backend": "openai", "model": "scripted", "base_url": server.base_url, "api_key_env": None}
    data = {"questions": str(questions), "generation": {"llm": llm}, "voting": {"runs": 1}}
    (folder / f"{name}.json").write_text(json.dumps(data))


def test_retrievals_are_downstream_of_the_three_indexes():
    """Answering stands downstream of indexing: retrievals depend on the three indexes."""
    graph = defs.resolve_asset_graph()
    parents = graph.get(AssetKey("retrievals")).parent_keys
    assert {AssetKey("vector_index"), AssetKey("bm25_index"), AssetKey("search_aids")} <= parents
    # The answering job still materializes the answering assets only.
    job = defs.resolve_job_def("answer_config")
    assert AssetKey("vector_index") not in job.asset_layer.executable_asset_keys


def _resolver(settings: KohakuSettings) -> CachingStaleStatusResolver:
    """What the UI's asset graph shows (the resolver its GraphQL layer uses)."""
    instance, graph = instance_for(settings.lake.root), defs.resolve_asset_graph()
    view = AssetGraphView(
        temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
        instance=instance,
        asset_graph=graph,
    )
    return CachingStaleStatusResolver(instance, graph, view)


def _status(settings: KohakuSettings, asset: str, partition: str) -> StaleStatus:
    return _resolver(settings).get_status(AssetKey(asset), partition)


def _causes(settings: KohakuSettings, asset: str, partition: str) -> list:
    return list(_resolver(settings).get_stale_causes(AssetKey(asset), partition))


def test_a_reindex_shows_the_answers_stale_and_starts_nothing(env):
    """After a re-index the answering assets show as stale (nothing starts by itself), and the
    leaderboard says which index its rows were answered on."""
    settings, server, questions = env
    write_config(settings, "a", server, questions)
    run_config(settings, "a")
    instance = instance_for(settings.lake.root)
    vector = instance.get_latest_materialization_event(AssetKey("vector_index"))
    assert vector is not None and vector.asset_materialization is not None
    version = vector.asset_materialization.tags["dagster/data_version"]
    assert version == st.index_fingerprint(settings.lake)
    board = pq.read_table(st.leaderboard_path(settings.lake)).to_pylist()
    assert [(r["config"], r["index_version"]) for r in board] == [("a", version)]
    assert all(_status(settings, a, "a") is StaleStatus.FRESH for a in ANSWERING)

    (settings.corpus / "water.md").write_text(DOCS["water"] + "\nA new paragraph about drought risk in Arizona.\n")
    run_index(settings, progress=quiet)
    # Dagster marks the direct downstream of a new data version: retrievals, the entry of a
    # config's answers (its downstream assets follow once it is re-run).
    assert _status(settings, "retrievals", "a") is StaleStatus.STALE
    causes = [(c.reason, c.dependency.asset_key.to_user_string()) for c in _causes(settings, "retrievals", "a")]
    assert ("has a new dependency data version", "vector_index") in causes
    # The automation sensor's conditions request no answering asset (nothing calls the LLM).
    calls = len(server.requests)
    result = evaluate_automation_conditions(defs=defs, instance=instance)
    assert result.total_requested == 0
    graph = defs.resolve_asset_graph()
    assert all(graph.get(AssetKey(a)).automation_condition is None for a in ANSWERING)
    assert len(server.requests) == calls
    # The run that follows recomputes under the new index, and the row names it.
    run_config(settings, "a")
    assert all(_status(settings, a, "a") is StaleStatus.FRESH for a in ANSWERING)
    board = pq.read_table(st.leaderboard_path(settings.lake)).to_pylist()
    assert board[0]["index_version"] == st.index_fingerprint(settings.lake) != version


def test_the_leaderboard_names_the_configs_that_never_ran(env):
    """A config that never ran is named on the leaderboard as such, not left as an unexplained
    "missing" partition of `scores`."""
    settings, server, questions = env
    write_config(settings, "a", server, questions)
    run_config(settings, "a")
    instance = instance_for(settings.lake.root)
    assert set(instance.get_dynamic_partitions("configs")) == {"a", "default"}
    event = instance.get_latest_materialization_event(AssetKey("leaderboard"))
    assert event is not None and event.asset_materialization is not None
    waiting = event.asset_materialization.metadata["not_scored"].value
    assert waiting.startswith("default (never run") and "kohaku eval --config NAME" in waiting


def test_configs_sensor_runs_only_what_changed_after_it_was_turned_on(env):
    """Turning the configs sensor on runs only what changed after, not every config that never
    ran (`default`, the bundled model, takes ~30 minutes)."""
    settings, server, questions = env
    write_config(settings, "old", server, questions)
    instance = instance_for(settings.lake.root)
    on = 1_700_000_000.0

    def tick(cursor, started=on):
        context = build_sensor_context(
            resources=resources_for(settings), instance=instance, cursor=cursor, last_sensor_start_time=started
        )
        return configs_sensor(context)

    first = tick(None)
    assert not first.run_requests
    assert sorted(first.dynamic_partitions_requests[0].partition_keys) == ["old"]  # default: registered at creation
    assert "already in" in first.skip_reason.skip_message
    second = tick(first.cursor)
    assert not second.run_requests  # nothing changed
    write_config(settings, "new", server, questions)
    third = tick(first.cursor)
    assert [r.partition_key for r in third.run_requests] == ["new"]
    (settings.lake.root / "configs" / "old.json").write_text(
        (settings.lake.root / "configs" / "old.json").read_text().replace('"runs": 1', '"runs": 2')
    )
    fourth = tick(third.cursor)
    assert [r.partition_key for r in fourth.run_requests] == ["old"]
    # Turned off and on again: what changed meanwhile is recorded, not run.
    (settings.lake.root / "configs" / "new.json").write_text(
        (settings.lake.root / "configs" / "new.json").read_text().replace('"runs": 1', '"runs": 3')
    )
    again = tick(fourth.cursor, started=on + 600)
    assert not again.run_requests and again.skip_reason is not None
    # A cursor written before this rule (the bare hashes) carries on without a baseline.
    bare = json.dumps(json.loads(fourth.cursor)["versions"])
    (settings.lake.root / "configs" / "old.json").write_text(
        (settings.lake.root / "configs" / "old.json").read_text().replace('"runs": 2', '"runs": 4')
    )
    assert sorted(r.partition_key for r in tick(bare).run_requests) == ["new", "old"]


def test_the_sensor_logs_what_it_skipped_and_each_runs_estimate(env, capfd):
    settings, server, questions = env
    write_config(settings, "old", server, questions)
    instance = instance_for(settings.lake.root)
    context = build_sensor_context(resources=resources_for(settings), instance=instance)
    first = configs_sensor(context)
    write_config(settings, "new", server, questions)
    second = configs_sensor(
        build_sensor_context(resources=resources_for(settings), instance=instance, cursor=first.cursor)
    )
    text = capfd.readouterr().err  # the tick's log (the daemon stores it with the tick)
    assert "not run: default, old" in text and "when the sensor was turned on" in text
    assert [r.partition_key for r in second.run_requests] == ["new"]
    assert "new: estimate" in text and "LLM calls" in text
    # The ensemble specs sensor follows the same rule.
    specs = ensemble_specs_sensor(build_sensor_context(resources=resources_for(settings), instance=instance))
    assert not specs.run_requests


def test_descriptions_name_the_real_lake():
    """Asset descriptions name the real lake's paths, not a `LAKE/` placeholder."""
    graph = defs.resolve_asset_graph()
    texts = [graph.get(AssetKey(a)).description or "" for a in ("leaderboard", "submission", "sweep_report")]
    for text in texts:
        assert "LAKE" not in text and lake_path("qa") in text, text


def test_the_leaderboard_lists_a_config_that_failed_as_failed_with_its_reason(env, tmp_path):
    """A config whose run failed (a broken config the feedback sensor ran, say) is listed as
    failed, with its reason, not as "never run"."""
    from kohaku_assets.runner import run_job

    settings, server, questions = env
    write_config(settings, "a", server, questions)
    write_config(settings, "broken", server, tmp_path / "moved_away.csv")
    instance_for(settings.lake.root).add_dynamic_partitions("configs", ["broken"])  # as configs_sensor does
    result = run_job(settings, "answer_config", "broken")  # what a sensor's run request starts
    assert not result.success
    assert result.dagster_run.tags["user"] == "kohaku eval --config broken"  # "Launched by" on the Runs page
    run_config(settings, "a", progress=quiet)
    instance = instance_for(settings.lake.root)
    event = instance.get_latest_materialization_event(AssetKey("leaderboard"))
    assert event is not None and event.asset_materialization is not None
    metadata = event.asset_materialization.metadata
    assert "broken" not in metadata["not_scored"].value  # it ran: not "never run"
    failed = metadata["failed"].value
    assert failed.startswith("broken (failed: ") and "moved_away.csv" in failed, failed
    assert "dagster" not in failed and "Traceback" not in failed, failed
