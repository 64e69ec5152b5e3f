"""The lake's persistent Dagster instance: its `dagster.yaml` (run monitoring, the run
queue, the cluster's storage), the default config a new lake is given, and the CLI runs
left STARTED by a process that died."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from dagster import DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter

from kohaku_assets import cluster
from kohaku_assets.dagster_private import GRPC_INFO_TAG
from kohaku_assets.partitions import CONFIGS
from kohaku_rag.answering.config_folder import config_files, configs_dir
from kohaku_rag.answering.qa_config import QAConfig
from kohaku_rag.answering.qa_config_file import dump_toml
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import write_bytes_atomic

# The instance's settings. Run monitoring lets `kohaku ui`'s daemon fail runs whose worker
# died (a kill -9, an OOM) instead of showing them STARTED forever; runs of `kohaku index`
# (in-process, no run worker to watch) are failed by `fail_orphaned_runs` instead.
_PRE_NUX_YAML = """telemetry:
  enabled: false
run_monitoring:
  enabled: true
  start_timeout_seconds: 180
  max_resume_run_attempts: 0
  poll_interval_seconds: 60
"""
# nux: off, so `kohaku ui`'s first visit opens on the lake, not on Dagster's newsletter sign-up
# (a local tool asks nothing of its user).
INSTANCE_YAML = _PRE_NUX_YAML + "nux:\n  enabled: false\n"
# What earlier versions wrote; replaced by INSTANCE_YAML (a file edited by hand is kept).
_OLD_INSTANCE_YAML = "telemetry:\n  enabled: false\n"
# A run launched from the UI, a sensor, the automation sensor or a backfill waits in the run
# queue until the daemon looks again: every 5 s by Dagster's default, ~1 s here (a lake's
# queue is short, and looking costs a query). bench/serving/ui_smoke.py times click → searchable.
QUEUE_YAML = "  dequeue_interval_seconds: 1\n"


def instance_yaml() -> str:
    """The lake's dagster.yaml: INSTANCE_YAML, the cluster's storage and queue limits when
    `KOHAKU_DAGSTER_PG` is set, and the run queue's dequeue interval."""
    extra = cluster.instance_yaml_extra()
    if "run_queue:\n" in extra:
        return INSTANCE_YAML + extra.replace("run_queue:\n", "run_queue:\n" + QUEUE_YAML, 1)
    return INSTANCE_YAML + extra + "run_queue:\n" + QUEUE_YAML


# Tags naming the process that runs a CLI run, so a later run can tell it died.
PID_TAG, HOST_TAG = "kohaku/pid", "kohaku/host"


def instance_for(lake_root: Path) -> DagsterInstance:
    """The lake's own persistent Dagster instance, so `kohaku ui` shows these runs."""
    home = Lake(Path(lake_root)).dagster_home
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    # KOHAKU_DAGSTER_PG moves runs, event logs and schedules to PostgreSQL (kohaku_assets.cluster);
    # a file we wrote follows it, a file edited by hand is kept.
    wanted = instance_yaml()
    with_queue = "run_queue:\n" + QUEUE_YAML
    ours = ("", _OLD_INSTANCE_YAML) + tuple(
        version
        for base in (_PRE_NUX_YAML, INSTANCE_YAML)
        for version in (
            base,  # before the dequeue interval
            base + cluster.postgres_yaml(),
            base + with_queue,
            base + cluster.postgres_yaml().replace("run_queue:\n", with_queue, 1),
        )
    )
    current = config.read_text(encoding="utf-8") if config.exists() else ""
    if current in ours and current != wanted:
        write_bytes_atomic(config, wanted.encode())
    # Dagster's own code (and `kohaku ui`) read the instance from DAGSTER_HOME.
    os.environ["DAGSTER_HOME"] = str(home)
    instance = DagsterInstance.from_config(str(home))
    lake = Lake(Path(lake_root))
    if not configs_dir(lake).exists():  # a new lake (or one that never had configs)
        register_default_config(lake, instance)
    return instance


def register_default_config(lake: Lake, instance: DagsterInstance) -> None:
    """A new lake answers out of the box: `CONFIGS/default.toml` written from the defaults
    (a user's file is kept) and its `default` partition registered. Only once: a user who
    deletes `default.toml` later does not see it come back."""
    folder = configs_dir(lake)
    if "default" not in config_files(folder):
        write_bytes_atomic(folder / "default.toml", dump_toml(QAConfig()).encode())
    if not instance.has_dynamic_partition(CONFIGS, "default"):
        instance.add_dynamic_partitions(CONFIGS, ["default"])


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def fail_orphaned_runs(instance: DagsterInstance) -> list[str]:
    """Mark runs of this host's CLI left STARTED by a process that is gone (kill -9, OOM,
    power cut) as failed, so the UI tells the truth; returns their run ids. Runs launched
    by the UI's daemon are watched by its run monitoring instead."""
    failed: list[str] = []
    for run in orphaned_runs(instance):
        pid = run.tags[PID_TAG]
        instance.report_run_failed(run, f"the process running it (pid {pid}) ended without finishing it")
        failed.append(run.run_id)
    return failed


def orphaned_runs(instance: DagsterInstance) -> list[DagsterRun]:
    """Runs of this host's CLI left STARTED by a process that is gone."""
    active = [DagsterRunStatus.STARTED, DagsterRunStatus.STARTING, DagsterRunStatus.NOT_STARTED]
    host = socket.gethostname()
    found: list[DagsterRun] = []
    for run in instance.get_runs(filters=RunsFilter(statuses=active, tags={HOST_TAG: host})):
        if run.parent_run_id is not None or GRPC_INFO_TAG in run.tags:
            # A re-execution from the UI (or its automatic retry) inherits a CLI run's tags,
            # but runs in the UI's own run worker, watched by its run monitoring.
            continue
        pid = run.tags.get(PID_TAG, "")
        if pid.isdigit() and int(pid) != os.getpid() and not _process_alive(int(pid)):
            found.append(run)
    return found
