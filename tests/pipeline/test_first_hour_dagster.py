"""The Dagster UI's first visit, asked of Dagster's own GraphQL API (what the UI
reads) over the lake's instance and the real code location: no newsletter pop-up on the
first visit, and each served_* asset lists the sensor that keeps it up to date."""

from __future__ import annotations

from pathlib import Path

from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import ModuleTarget
from dagster_graphql.test.utils import execute_dagster_graphql

from kohaku_assets.instance import instance_for
from kohaku_assets.runner import LAUNCHED_BY_TAG, cli_command

QUERY = """
query {
  shouldShowNux
  feedback: assetNodeOrError(assetKey: {path: ["served_feedback"]}) {
    ... on AssetNode { targetingInstigators { __typename ... on Sensor { name } } }
  }
  served: assetNodeOrError(assetKey: {path: ["served_answers"]}) {
    ... on AssetNode { targetingInstigators { __typename ... on Sensor { name } } }
  }
}
"""


def test_the_ui_asks_nothing_and_lists_the_served_sensors(tmp_path: Path, monkeypatch) -> None:
    # The first visit of `kohaku ui` asks nothing (no newsletter dialog: shouldShowNux is
    # false), and served_feedback's page lists its sensors.
    monkeypatch.setenv("KOHAKU_LAKE", str(tmp_path / "lake"))
    instance = instance_for(tmp_path / "lake")
    target = ModuleTarget(
        module_name="kohaku_assets.definitions", attribute="defs", working_directory=None, location_name="kohaku-lake"
    )
    with WorkspaceProcessContext(instance, target) as workspace:
        data = execute_dagster_graphql(workspace.create_request_context(), QUERY).data
    assert data["shouldShowNux"] is False
    assert {"__typename": "Sensor", "name": "served_feedback_sensor"} in data["feedback"]["targetingInstigators"]
    assert {"__typename": "Sensor", "name": "served_answers_sensor"} in data["served"]["targetingInstigators"]


def test_cli_runs_are_named_by_their_command() -> None:
    # The Runs page names a CLI run by its command, not "Manually launched".
    assert LAUNCHED_BY_TAG == "user"  # the tag the Runs page's "Launched by" column reads
    assert cli_command("answer_config", "default") == "kohaku eval --config default"
    assert cli_command("assemble_indexes", None) == "kohaku index"
    assert cli_command("index_document", "doc1") == "kohaku index (doc1)"
