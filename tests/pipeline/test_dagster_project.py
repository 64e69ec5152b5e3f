"""The project as Dagster's tools expect it: `dg` loads it, Dagster's private API stays in
one module whose every use is named here, the run queue and automation tuned for one machine."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import dagster
import pytest
import yaml
from dagster import DagsterInstance

import kohaku_assets.dagster_private as private
from kohaku_assets.definitions import automation_sensor, defs
from kohaku_assets.instance import instance_for, instance_yaml

REPO = Path(__file__).resolve().parents[2]
DG = Path(sys.executable).parent / "dg"


def _dg(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "KOHAKU_LAKE": str(tmp_path / "lake"),
        "DAGSTER_HOME": str(tmp_path / "home"),
        "PATH": f"{DG.parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    (tmp_path / "home").mkdir(exist_ok=True)
    (tmp_path / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    return subprocess.run([str(DG), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(not DG.exists(), reason="dagster-dg-cli is not installed")
def test_dg_check_defs_and_list_defs(tmp_path):
    """The repository is a Dagster project (`[tool.dg]`): `dg check defs` and `dg list defs` work."""
    check = _dg("check", "defs", tmp_path=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "All definitions loaded successfully" in check.stdout + check.stderr
    listed = _dg("list", "defs", "--json", tmp_path=tmp_path)
    assert listed.returncode == 0, listed.stderr
    out = listed.stdout
    data = __import__("json").loads(out[out.index("{") :])
    assets = {a["asset_key"]: a for a in data["assets"]}
    assert {"vector_index", "retrievals", "leaderboard"} <= set(assets)
    assert "vector_index" in assets["retrievals"]["dependency_keys"]
    assert {j["name"] for j in data["jobs"]} >= {"index_document", "assemble_indexes", "answer_config"}
    assert {s["name"] for s in data["sensors"]} >= {"corpus_sensor", "configs_sensor"}


def test_dg_pin_matches_dagster():
    text = (REPO / "pyproject.toml").read_text()
    pins = dict(re.findall(r'"(dagster(?:-webserver|-dg-cli)?)==([0-9.]+)"', text))
    assert pins["dagster-dg-cli"] == pins["dagster"] == pins["dagster-webserver"] == dagster.__version__


# ── Dagster's private API: one module, each use named ───────────────────────────


def test_no_dagster_private_import_outside_the_wrapper():
    """Only the wrapper module imports Dagster's private modules (`dagster._...`)."""
    pattern = re.compile(r"^\s*(from|import)\s+dagster\._", re.MULTILINE)
    offenders = [
        str(path.relative_to(REPO))
        for path in sorted((REPO / "kohaku_assets").rglob("*.py"))
        if path.name != "dagster_private.py" and pattern.search(path.read_text())
    ]
    assert offenders == [], f"import these through kohaku_assets/dagster_private.py: {offenders}"


def test_the_dagster_version_is_one_the_private_api_was_checked_on():
    minor = ".".join(dagster.__version__.split(".")[:2])
    assert minor in private.TESTED_MINORS, (
        f"dagster {dagster.__version__}: re-check every use in kohaku_assets/dagster_private.py "
        "(the tests below), then add its minor version to TESTED_MINORS"
    )


def test_cli_runs_filed_under_the_code_location_need_create_run_for_job_with_origins():
    """kohaku_assets.runner.run_job: breaks if the instance can no longer create a run with
    the location's origins, or execute_run/create_execution_plan change their arguments."""
    params = inspect.signature(DagsterInstance.create_run_for_job).parameters
    assert {"job_def", "execution_plan", "remote_job_origin", "job_code_origin", "asset_selection"} <= set(params)
    assert {"job", "run_config", "instance_ref", "tags"} <= set(
        inspect.signature(private.create_execution_plan).parameters
    )
    assert {"raise_on_error"} <= set(inspect.signature(private.execute_run).parameters)
    assert list(inspect.signature(private.merge_run_tags).parameters)[:3] == ["job_def", "partition_key", "tags"]
    origins = private.location_origins_from_yaml_paths([str(REPO / "workspace.yaml")])
    assert [o.location_name for o in origins] == ["kohaku-lake"]
    assert isinstance(origins[0], private.CodeLocationOrigin)
    repo = private.RemoteRepositoryOrigin(origins[0], defs.get_repository_def().name)
    assert repo.get_job_origin("index_document").job_name == "index_document"
    recon = private.ReconstructableRepository.for_module("kohaku_assets.definitions", "defs", None, sys.executable)
    assert recon.get_reconstructable_job("index_document").get_python_origin() is not None
    assert private.InMemoryJob(defs.resolve_job_def("index_document")).get_definition().name == "index_document"


def test_the_tags_the_sensors_and_the_orphan_check_read():
    """kohaku_assets.sensors (which run keys already ran) and runner.fail_orphaned_runs (a
    run launched by the UI's daemon) read these tags by name."""
    assert private.RUN_KEY_TAG == "dagster/run_key"
    assert private.GRPC_INFO_TAG == ".dagster/grpc_info"
    assert isinstance(dagster.define_asset_job("x", selection="*"), private.UnresolvedAssetJobDefinition)


def test_a_sweep_backfill_is_built_from_asset_partitions():
    """kohaku_assets.cli.experiments.submit_backfill: breaks if PartitionBackfill loses
    `from_asset_partitions` or its arguments."""
    params = inspect.signature(private.PartitionBackfill.from_asset_partitions).parameters
    wanted = {"backfill_id", "asset_graph", "partition_names", "asset_selection", "tags", "title", "description"}
    assert wanted <= set(params)
    assert private.make_new_backfill_id()


def test_the_celery_executor_takes_a_retry_mode():
    """kohaku_assets.cluster.kohaku_executor (Celery branch)."""
    assert private.RetryMode.DISABLED and private.RetryMode.ENABLED


# ── one machine: a short queue wait, a quick automation sensor ─────────────────


def test_the_lakes_run_queue_is_looked_at_every_second(tmp_path, monkeypatch):
    """The lake's run queue is looked at every second, not Dagster's default 5 s (runs launched
    from the UI would wait); a dagster.yaml written by an earlier version is upgraded, one
    edited by hand kept."""
    monkeypatch.delenv("KOHAKU_DAGSTER_PG", raising=False)
    instance = instance_for(tmp_path / "lake")
    assert instance.run_coordinator.dequeue_interval_seconds == 1  # type: ignore[attr-defined]
    monkeypatch.setenv("KOHAKU_DAGSTER_PG", "postgresql://u@db/dagster")
    queue = yaml.safe_load(instance_yaml())["run_queue"]
    assert queue["dequeue_interval_seconds"] == 1 and queue["tag_concurrency_limits"]
    monkeypatch.delenv("KOHAKU_DAGSTER_PG")
    config = tmp_path / "old" / ".dagster" / "dagster.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("telemetry:\n  enabled: false\n")
    instance_for(tmp_path / "old")
    assert "dequeue_interval_seconds: 1" in config.read_text()
    config.write_text("telemetry:\n  enabled: false\n# mine\n")
    instance_for(tmp_path / "old")
    assert config.read_text().endswith("# mine\n")


def test_the_automation_sensor_evaluates_often_and_tags_its_runs():
    """The automation sensor evaluates every 5 s, not 30, and tags its runs (no "Jobless asset
    materializations")."""
    assert automation_sensor.minimum_interval_seconds == 5
    assert automation_sensor.run_tags == {"kohaku/trigger": "automation"}
