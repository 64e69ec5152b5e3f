"""Every piece of Dagster's private API (`dagster._core`) kohaku_assets uses, in one place.

Each has no public route in Dagster 1.13 (checked: the `dagster` and `dagster_graphql`
packages, `dg launch`, the instance's public methods). On an upgrade, run
tests/pipeline/test_dagster_project.py first: it names what each import is for and checks
the shape we rely on, so a break shows up there rather than in a user's run.

- A CLI run recorded like a run launched from `kohaku ui` (kohaku_assets.runner): the run is
  created with the code location's origin, so the UI files it under the location's job.
  `JobDefinition.execute_in_process` and `dagster.execute_job` run a job but record no
  location origin (their runs show as runs of another location, with no re-execution).
  Needs: `create_execution_plan`, `execute_run`, `merge_run_tags`, `InMemoryJob`,
  `ReconstructableRepository`, the origins and `location_origins_from_yaml_paths`
  (workspace.yaml as the webserver reads it), `ExecutionResult` (the type they return),
  `GRPC_INFO_TAG` (a run launched by the UI's daemon carries it).
- The run key a sensor gave its request (kohaku_assets.sensors): `RUN_KEY_TAG`, to ask the
  instance which keys already ran. `UnresolvedAssetJobDefinition`: the type
  `define_asset_job` returns (not exported), for a typed `folder_sensor`.
- A sweep submitted as one asset backfill for the UI's daemon (kohaku_assets.cli.experiments):
  `PartitionBackfill`, `make_new_backfill_id`. The public route, GraphQL's
  `launchPartitionBackfill`, needs a running webserver.
- The Celery executor's retry mode (kohaku_assets.cluster): `RetryMode` (dagster-celery's
  `CeleryExecutor` takes one). The in-process branch uses `in_process_executor` itself.
"""

from dagster._core.definitions.job_base import InMemoryJob
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.definitions.unresolved_asset_job_definition import UnresolvedAssetJobDefinition
from dagster._core.execution.api import create_execution_plan, execute_run
from dagster._core.execution.backfill import PartitionBackfill
from dagster._core.execution.execute_in_process import merge_run_tags
from dagster._core.execution.execution_result import ExecutionResult
from dagster._core.execution.retries import RetryMode
from dagster._core.remote_origin import CodeLocationOrigin, RegisteredCodeLocationOrigin, RemoteRepositoryOrigin
from dagster._core.storage.tags import GRPC_INFO_TAG, RUN_KEY_TAG
from dagster._core.utils import make_new_backfill_id
from dagster._core.workspace.load import location_origins_from_yaml_paths

# The Dagster minor versions this module was checked against (pyproject pins the patch).
TESTED_MINORS = ("1.13",)

__all__ = [
    "GRPC_INFO_TAG",
    "RUN_KEY_TAG",
    "TESTED_MINORS",
    "CodeLocationOrigin",
    "ExecutionResult",
    "InMemoryJob",
    "PartitionBackfill",
    "ReconstructableRepository",
    "RegisteredCodeLocationOrigin",
    "RemoteRepositoryOrigin",
    "RetryMode",
    "UnresolvedAssetJobDefinition",
    "create_execution_plan",
    "execute_run",
    "location_origins_from_yaml_paths",
    "make_new_backfill_id",
    "merge_run_tags",
]
