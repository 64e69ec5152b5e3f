"""Served answers are data: each question asked is a row of its day's `served_answers`
partition, and the Dagster asset shows the day's rows."""

from __future__ import annotations

from datetime import UTC, datetime

from dagster import DagsterInstance, materialize
from serving_corpus import WATER_QUESTION
from starlette.testclient import TestClient

from kohaku_assets.assets.serving import served_answers
from kohaku_assets.resources import KohakuSettings
from kohaku_assets.runner import resources_for
from kohaku_rag.lake import Lake
from kohaku_rag.serving.served import SERVED_SCHEMA, day_of, day_path, read_day


def test_each_question_is_a_row_and_the_day_is_an_asset_partition(app, lake) -> None:
    with TestClient(app) as client:
        client.post("/api/ask", json={"question": WATER_QUESTION, "unit": "L/kWh"})
        client.post("/api/ask", json={"question": WATER_QUESTION, "unit": "L/kWh"})  # from the store
        client.post(
            "/v1/chat/completions", json={"model": "fake", "messages": [{"role": "user", "content": WATER_QUESTION}]}
        )
    day = day_of(datetime.now(UTC))
    table = read_day(day_path(Lake(lake), day))
    assert table.schema.equals(SERVED_SCHEMA)
    rows = table.to_pylist()
    assert [(r["stored"], r["via"]) for r in rows] == [(False, "api"), (True, "api"), (False, "openai")]
    assert rows[0]["seconds"] > 0 and rows[1]["seconds"] == 0 and rows[0]["answer"] == "0.18 L/kWh"
    result = materialize(
        [served_answers],
        partition_key=day,
        instance=DagsterInstance.ephemeral(),
        resources=resources_for(KohakuSettings(lake_root=str(lake))),
    )
    assert result.success
    (mat,) = result.asset_materializations_for_node("served_answers")
    assert mat.metadata["questions"].value == 3 and mat.metadata["answered_from_store"].value == 1
    assert len(mat.metadata["latest"].value.records) == 3
