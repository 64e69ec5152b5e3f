"""Running the lake's Dagster on its distributed pieces: a PostgreSQL instance and Celery workers.

Two environment variables switch them on; without them nothing changes (the embedded SQLite
instance, every step in the run's process):

- `KOHAKU_DAGSTER_PG` (a `postgresql://` URL): the lake's `dagster.yaml` keeps runs, event
  logs and schedules in PostgreSQL (`dagster-postgres`), which several processes and machines
  can share safely; a SQLite instance cannot.
- `KOHAKU_CELERY_BROKER` (e.g. `redis://host:6379/0`; `KOHAKU_CELERY_BACKEND` for results,
  default the broker's next Redis database): the per-document and per-config jobs run each step
  as a Celery task on `dagster-celery` workers. The index assembly (and the leaderboard) stay
  in the orchestrating process: the indexes have one writer.

`kohaku_assets.cluster.servers` starts local PostgreSQL, Redis and workers (tests, `make
cluster-demo`, bench/indexing/scale.py).
"""

from __future__ import annotations

import os
import warnings

from dagster import (
    Executor,
    InitExecutorContext,
    executor,
    in_process_executor,
    multiple_process_executor_requirements,
)

from kohaku_assets.dagster_private import RetryMode

__all__ = [
    "BACKEND_ENV",
    "BROKER_ENV",
    "DISTRIBUTED_JOBS",
    "PARALLEL_ENV",
    "LLM_TAG",
    "PG_ENV",
    "WRITER_TAG",
    "celery_backend",
    "celery_broker",
    "celery_config",
    "distributed",
    "instance_yaml_extra",
    "kohaku_executor",
    "parallel_runs",
    "postgres_yaml",
]

PG_ENV = "KOHAKU_DAGSTER_PG"
BROKER_ENV = "KOHAKU_CELERY_BROKER"
BACKEND_ENV = "KOHAKU_CELERY_BACKEND"
# How many document runs `kohaku index` orchestrates at once on the cluster (each run's steps
# execute on whichever worker is free); default: 4.
PARALLEL_ENV = "KOHAKU_CLUSTER_RUNS"
# The jobs whose steps go to the workers: per document and per config, many of them at once.
# assemble_indexes and update_leaderboard write one shared file each: they run where the run is
# orchestrated, one at a time (the run queue's WRITER_TAG limit for runs the daemon launches).
DISTRIBUTED_JOBS = frozenset({"index_document", "repair_tables", "answer_config", "vote_ensemble"})
WRITER_TAG = "kohaku/writer"
# A run tag the run queue limits per value: tag runs (or a backfill) with their LLM endpoint
# and at most one of them asks it at a time (within a run, `max_concurrent` bounds requests).
LLM_TAG = "kohaku/llm"


def celery_broker() -> str:
    return os.environ.get(BROKER_ENV, "")


def celery_backend() -> str:
    """The results backend: `KOHAKU_CELERY_BACKEND`, else the broker's Redis database + 1."""
    explicit = os.environ.get(BACKEND_ENV, "")
    if explicit:
        return explicit
    broker = celery_broker()
    base, _, db = broker.rpartition("/")
    if broker.startswith("redis") and db.isdigit():
        return f"{base}/{int(db) + 1}"
    return broker


def distributed(job_name: str) -> bool:
    """True when `job_name`'s steps run on Celery workers (a broker is configured)."""
    return bool(celery_broker()) and job_name in DISTRIBUTED_JOBS


def parallel_runs() -> int:
    """Document runs orchestrated at once: 1 in-process, else `KOHAKU_CLUSTER_RUNS` (4)."""
    if not celery_broker():
        return 1
    raw = os.environ.get(PARALLEL_ENV, "4")
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{PARALLEL_ENV}={raw!r}: give a positive number of runs")
    return int(raw)


def celery_config() -> dict[str, object]:
    """The `celery_executor` config; the same block (as `execution: config:`) starts workers."""
    return {
        "broker": celery_broker(),
        "backend": celery_backend(),
        # A worker takes one step at a time: a long PDF does not hold back queued documents.
        "config_source": {"worker_prefetch_multiplier": 1, "task_acks_late": True},
    }


@executor(
    name="kohaku",
    # in_process_executor's own settings (retries on by default), so that branch is that executor.
    config_schema=in_process_executor.config_schema.as_field(),
    requirements=multiple_process_executor_requirements(),
)
def kohaku_executor(init_context: InitExecutorContext) -> Executor:
    """Chosen when a run starts, from the orchestrating process's environment (not when the
    code location is imported): Celery workers when `KOHAKU_CELERY_BROKER` is set, else
    every step in the run's process, by `in_process_executor` (retries on)."""
    if not celery_broker():
        return in_process_executor.executor_creation_fn(init_context)  # type: ignore[misc]
    from dagster_celery.executor import CeleryExecutor  # the optional `cluster` extra

    # dagster-celery registers its task again for every step it submits; Celery warns each time.
    warnings.filterwarnings("ignore", message="Task name 'execute_plan' is already registered")
    return CeleryExecutor(retries=RetryMode.DISABLED, **celery_config())


def instance_yaml_extra() -> str:
    """What the lake's dagster.yaml adds to its defaults: `postgres_yaml()` when
    `KOHAKU_DAGSTER_PG` is set, else nothing (the embedded SQLite instance)."""
    return postgres_yaml() if os.environ.get(PG_ENV) else ""


def postgres_yaml() -> str:
    """Storage in PostgreSQL (the URL is read from the environment, never written to disk)
    and a run queue (for runs the UI, sensors and schedule launch) that starts at most one
    run per writer (the indexes, the leaderboard) and per LLM endpoint at a time."""
    return f"""storage:
  postgres:
    postgres_url:
      env: {PG_ENV}
run_queue:
  max_concurrent_runs: 16
  tag_concurrency_limits:
    - key: "{WRITER_TAG}"
      value:
        applyLimitPerUniqueValue: true
      limit: 1
    - key: "{LLM_TAG}"
      value:
        applyLimitPerUniqueValue: true
      limit: 1
"""
