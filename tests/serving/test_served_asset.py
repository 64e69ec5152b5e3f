"""Served answers are data: each question asked is a row of its day's `served_answers`
partition, and the Dagster asset shows the day's rows."""

from __future__ import annotations

from datetime import UTC, datetime

from dagster import (
    AssetKey,
    DagsterInstance,
    DynamicPartitionsDefinition,
    SensorResult,
    build_sensor_context,
    materialize,
)
from starlette.testclient import TestClient

from kohaku_assets.assets.serving import served_answers
from kohaku_assets.resources import KohakuSettings
from kohaku_assets.runner import resources_for
from kohaku_assets.sensors import served_answers_sensor
from kohaku_rag.lake.layout import Lake
from kohaku_rag.serving.served_answers import day_of, day_rows
from tests.support.serving_corpus import WATER_QUESTION


def test_each_question_is_a_row_and_the_day_is_an_asset_partition(app, lake) -> None:
    with TestClient(app) as client:
        client.post("/api/ask", json={"question": WATER_QUESTION, "unit": "L/kWh"})
        client.post("/api/ask", json={"question": WATER_QUESTION, "unit": "L/kWh"})  # from the store
        client.post(
            "/v1/chat/completions", json={"model": "fake", "messages": [{"role": "user", "content": WATER_QUESTION}]}
        )
    day = day_of(datetime.now(UTC))
    rows = day_rows(Lake(lake), day)
    assert [(r["stored"], r["via"]) for r in rows] == [(False, "api"), (True, "api"), (False, "openai")]
    assert rows[0]["seconds"] > 0 and rows[1]["seconds"] == 0 and rows[0]["answer"] == "0.18 L/kWh"
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("served_days", [day])
    result = materialize(
        [served_answers],
        partition_key=day,
        instance=instance,
        resources=resources_for(KohakuSettings(lake_root=str(lake))),
    )
    assert result.success
    (mat,) = result.asset_materializations_for_node("served_answers")
    assert mat.metadata["questions"].value == 3 and mat.metadata["answered_from_store"].value == 1
    assert len(mat.metadata["latest"].value.records) == 3


def test_only_days_with_answers_are_partitions_and_the_sensor_records_them(app, lake) -> None:
    """A daily partition per calendar day showed "0 / All / 0 / 0" (every day since the
    start date missing); a day is a partition once something was served that day, and the
    sensor records its rows (no run) when its file changes."""
    assert isinstance(served_answers.partitions_def, DynamicPartitionsDefinition)
    instance = DagsterInstance.ephemeral()
    resources = resources_for(KohakuSettings(lake_root=str(lake)))

    def tick(cursor: str | None) -> SensorResult | object:
        return served_answers_sensor(build_sensor_context(instance=instance, resources=resources, cursor=cursor))

    assert "no served answers" in str(tick(None).skip_message)
    with TestClient(app) as client:
        client.post("/api/ask", json={"question": WATER_QUESTION, "unit": "L/kWh"})
    day = day_of(datetime.now(UTC))
    first = tick(None)
    assert isinstance(first, SensorResult) and not first.run_requests
    (added,) = first.dynamic_partitions_requests
    assert added.partitions_def_name == "served_days" and list(added.partition_keys) == [day]
    (event,) = first.asset_events
    assert event.asset_key == AssetKey("served_answers") and event.partition == day
    assert event.metadata["questions"].value == 1
    instance.add_dynamic_partitions("served_days", [day])

    assert "no served answers" in str(tick(first.cursor).skip_message)  # nothing new: quiet
    with TestClient(app) as client:
        client.post("/api/ask", json={"question": WATER_QUESTION, "unit": "L/kWh"})  # from the store
    second = tick(first.cursor)
    assert isinstance(second, SensorResult) and not second.dynamic_partitions_requests
    assert second.asset_events[0].metadata["questions"].value == 2
