"""The corpus sensor's check of which run keys already ran: batched, exact."""

from __future__ import annotations

from dagster import DagsterInstance, build_sensor_context
from dagster._core.storage.dagster_run import DagsterRun
from dagster._core.storage.tags import RUN_KEY_TAG

from kohaku_assets import sensors
from kohaku_assets.sensors import _run_keys_used


def test_run_keys_used_finds_exactly_the_keys_that_ran_across_batches(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(sensors, "RUN_KEY_BATCH", 3)  # several batches with a few keys
    with DagsterInstance.ephemeral(tempdir=str(tmp_path)) as instance:
        for key in ("a:1", "c:1", "g:1"):
            instance.add_run(DagsterRun(job_name="index_document", tags={RUN_KEY_TAG: key}))
        instance.add_run(DagsterRun(job_name="index_document", tags={"other": "b:1"}))
        context = build_sensor_context(instance=instance)
        keys = ["a:1", "b:1", "c:1", "d:1", "e:1", "f:1", "g:1", "a:2"]
        assert _run_keys_used(context, keys) == {"a:1", "c:1", "g:1"}
        assert _run_keys_used(context, []) == set()
