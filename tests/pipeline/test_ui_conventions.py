"""The Dagster UI as the front door: automation on, descriptions that render, Dagster's
conventions (kinds, owners, code versions, described and partitioned checks, tables)."""

import re

import pytest
from dagster import (
    AssetKey,
    AssetMaterialization,
    DagsterInstance,
    DefaultSensorStatus,
    Failure,
    evaluate_automation_conditions,
)

from kohaku_assets.assets import ALL_ASSETS
from kohaku_assets.assets.answering import partition_config, score_range_check
from kohaku_assets.assets.documents import cut_at_word, sample_table
from kohaku_assets.cli import build_parser
from kohaku_assets.definitions import defs
from kohaku_assets.instance import instance_for
from kohaku_assets.partitions import CONFIGS, DOCUMENTS
from kohaku_assets.resources import REPO_ROOT, KohakuSettings
from kohaku_rag.answering.config_folder import configs_dir
from kohaku_rag.document.tree import Node, NodeKind


def _specs():
    return [spec for a in ALL_ASSETS for spec in a.specs]


def test_automation_sensor_starts_running():
    sensor = defs.get_sensor_def("default_automation_condition_sensor")
    assert sensor.default_status is DefaultSensorStatus.RUNNING


def test_descriptions_render_without_html_like_placeholders():
    texts = [s.description or "" for s in _specs()]
    texts += [c.description or "" for a in ALL_ASSETS for c in a.check_specs]
    texts += [j.description or "" for j in defs.jobs or []]  # type: ignore[union-attr]
    for text in texts:
        assert text, "every asset, check and job has a description"
        assert not re.search(r"<[A-Za-z/][^>]*>", re.sub(r"`[^`]*`", "", text)), text


def test_kinds_owners_code_versions_and_checks():
    for spec in _specs():
        assert spec.kinds and "python" in spec.kinds, spec.key
        assert spec.owners and spec.tags.get("stage"), spec.key
        assert spec.code_version, spec.key
    by_key = {s.key.to_user_string(): s for s in _specs()}
    assert "pdf" in by_key["document_tree"].kinds and "sqlite" in by_key["vector_index"].kinds
    assert "duckdb" in by_key["leaderboard"].kinds
    checks = {c.key.name: c for a in ALL_ASSETS for c in a.check_specs}
    assert {"every_question_answered", "refs_within_corpus", "scores_in_range", "tree_not_empty"} <= set(checks)
    assert all(c.description for c in checks.values())
    assert checks["tree_not_empty"].partitions_def is not None  # one result per document
    assert checks["every_question_answered"].partitions_def is not None
    for name in ("vector_index", "bm25_index", "leaderboard"):
        assert by_key[name].automation_condition is not None
        assert "up to date" in (by_key[name].description or "").lower()


def test_score_range_check():
    assert score_range_check({"final": 0.5, "value": 1.0}).passed
    assert not score_range_check({"final": 1.5}).passed


def test_sample_table_holds_node_kind_and_cuts_at_words():
    text = "word " * 60
    node = Node("d:sec1:p1", "d", "d:sec1", NodeKind.PARAGRAPH, 0, "", text)
    table = sample_table([node])
    row = table.value.records[0].data  # type: ignore[attr-defined]
    assert row["kind"] == "paragraph" and row["attachment"] != row["kind"]
    assert row["text"].endswith("word…") and len(row["text"]) <= 160
    assert cut_at_word("short text") == "short text"
    assert [c.name for c in table.value.schema.columns][:2] == ["node_id", "kind"]  # type: ignore[attr-defined]


def test_workspace_has_a_location_name():
    assert "location_name: kohaku-lake" in (REPO_ROOT / "workspace.yaml").read_text()


def test_ui_host_option():
    args = build_parser().parse_args(["ui"])
    assert args.host == "127.0.0.1"
    assert build_parser().parse_args(["ui", "--host", "0.0.0.0"]).host == "0.0.0.0"


def test_lake_creation_registers_default_config(tmp_path, monkeypatch):
    monkeypatch.delenv("KOHAKU_CONFIGS", raising=False)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "lake" / ".dagster"))
    settings = KohakuSettings(lake_root=str(tmp_path / "lake"))
    instance = instance_for(settings.lake.root)
    assert "default" in instance.get_dynamic_partitions(CONFIGS)
    default = configs_dir(settings.lake) / "default.toml"
    assert default.exists()
    default.write_text(default.read_text() + "\n# mine\n")
    instance_for(settings.lake.root)  # a user's file is never overwritten
    assert default.read_text().endswith("# mine\n")
    default.unlink()
    instance_for(settings.lake.root)  # only a new lake gets it: a deleted default stays deleted
    assert not default.exists()


def test_missing_config_fails_with_the_file_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.delenv("KOHAKU_CONFIGS", raising=False)
    settings = KohakuSettings(lake_root=str(tmp_path / "lake"))
    with pytest.raises(Failure) as info:
        partition_config(settings, "mine")
    assert "mine.toml" in info.value.description and "create" in info.value.description
    (configs_dir(settings.lake)).mkdir(parents=True, exist_ok=True)
    (configs_dir(settings.lake) / "bad.toml").write_text("questions = 3\n")
    with pytest.raises(Failure, match="invalid"):
        partition_config(settings, "bad")


def test_conditions_fire_after_backfill_materializations():
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(CONFIGS, ["a", "b"])
    instance.add_dynamic_partitions(DOCUMENTS, ["d1", "d2"])
    first = evaluate_automation_conditions(defs, instance)
    # Nothing built yet: nothing to assemble or rank.
    assert first.total_requested == 0
    # A UI backfill materializes one document and one config's scores; `b`, `d2` and every
    # cross_ensemble partition are still missing (eager() would wait for them forever).
    instance.report_runless_asset_event(AssetMaterialization("scores", partition="a"))
    instance.report_runless_asset_event(AssetMaterialization("index_rows", partition="d1"))
    second = evaluate_automation_conditions(defs, instance, cursor=first.cursor)
    for key in ("leaderboard", "vector_index", "bm25_index"):
        assert second.get_num_requested(AssetKey(key)) == 1, key
    for key in ("leaderboard", "vector_index", "bm25_index"):
        instance.report_runless_asset_event(AssetMaterialization(key))
    third = evaluate_automation_conditions(defs, instance, cursor=second.cursor)
    assert third.total_requested == 0


def test_first_evaluation_catches_up_on_a_lake_built_while_the_sensor_was_off():
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(CONFIGS, ["a"])
    instance.report_runless_asset_event(AssetMaterialization("scores", partition="a"))
    first = evaluate_automation_conditions(defs, instance)
    assert first.get_num_requested(AssetKey("leaderboard")) == 1
    assert first.get_num_requested(AssetKey("vector_index")) == 0


def test_a_partition_without_its_file_fails_with_the_reason(tmp_path, monkeypatch):
    from dagster import materialize

    from kohaku_assets.assets.answering import question_set
    from kohaku_assets.runner import failure_message, resources_for

    monkeypatch.delenv("KOHAKU_CONFIGS", raising=False)
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(CONFIGS, ["added_in_ui"])
    settings = KohakuSettings(lake_root=str(tmp_path / "lake"))
    result = materialize(
        [question_set],
        partition_key="added_in_ui",
        instance=instance,
        resources=resources_for(settings),
        raise_on_error=False,
    )
    assert not result.success
    message = failure_message(result)
    assert "no config file for partition 'added_in_ui'" in message and "added_in_ui.toml" in message


def test_kohaku_ui_passes_the_host_and_says_where(tmp_path, monkeypatch, capsys):
    import kohaku_assets.cli as cli

    calls = []
    monkeypatch.setattr(cli, "supervise", lambda cmd, env: calls.append((cmd, env)) or 0)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "lake" / ".dagster"))
    lake = tmp_path / "lake"
    assert cli.main(["ui", "--lake", str(lake), "--corpus", str(tmp_path), "--port", "3005"]) == 0
    cmd, env = calls[0]
    assert cmd[cmd.index("-h") + 1] == "127.0.0.1" and cmd[cmd.index("-p") + 1] == "3005"
    assert "dev" in cmd and env["DAGSTER_HOME"] == str(lake.resolve() / ".dagster")
    assert "http://127.0.0.1:3005" in capsys.readouterr().out
