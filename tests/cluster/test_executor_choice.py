"""Which executor and instance settings the environment selects (no servers needed)."""

from __future__ import annotations

import pytest
import yaml
from dagster import DagsterInstance, InitExecutorContext
from dagster._core.definitions.job_base import InMemoryJob
from dagster._core.executor.in_process import InProcessExecutor

from kohaku_assets import cluster
from kohaku_assets.definitions import defs


def _executor(instance: DagsterInstance) -> object:
    context = InitExecutorContext(
        job=InMemoryJob(defs.resolve_job_def("index_document")),
        executor_def=cluster.kohaku_executor,
        executor_config={"retries": {"enabled": {}}},  # what run config resolves to by default
        instance=instance,
    )
    return cluster.kohaku_executor.executor_creation_fn(context)  # type: ignore[misc]


def test_without_a_broker_every_step_runs_in_the_run_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cluster.BROKER_ENV, raising=False)
    with DagsterInstance.ephemeral() as instance:
        assert isinstance(_executor(instance), InProcessExecutor)
    assert cluster.parallel_runs() == 1 and not cluster.distributed("index_document")


def test_a_broker_selects_celery_for_the_per_document_and_per_config_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    from dagster_celery.executor import CeleryExecutor

    monkeypatch.setenv(cluster.BROKER_ENV, "redis://10.0.0.5:6379/2")
    monkeypatch.delenv(cluster.BACKEND_ENV, raising=False)
    with DagsterInstance.ephemeral() as instance:
        celery = _executor(instance)
    assert isinstance(celery, CeleryExecutor)
    assert (celery.broker, celery.backend) == ("redis://10.0.0.5:6379/2", "redis://10.0.0.5:6379/3")
    assert cluster.distributed("index_document") and cluster.distributed("answer_config")
    assert not cluster.distributed("assemble_indexes") and not cluster.distributed("update_leaderboard")
    monkeypatch.setenv(cluster.PARALLEL_ENV, "0")
    with pytest.raises(ValueError, match="KOHAKU_CLUSTER_RUNS"):
        cluster.parallel_runs()


def test_postgres_instance_yaml_reads_the_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cluster.PG_ENV, raising=False)
    assert cluster.instance_yaml_extra() == ""
    monkeypatch.setenv(cluster.PG_ENV, "postgresql+psycopg2://u:secret@db/dagster")
    text = cluster.instance_yaml_extra()
    assert "secret" not in text
    config = yaml.safe_load(text)
    assert config["storage"]["postgres"]["postgres_url"] == {"env": cluster.PG_ENV}
    limits = {limit["key"]: limit for limit in config["run_queue"]["tag_concurrency_limits"]}
    assert limits[cluster.WRITER_TAG]["limit"] == 1 and limits[cluster.LLM_TAG]["value"]["applyLimitPerUniqueValue"]
