"""The Dagster code location that `workspace.yaml` loads."""

from dagster import Definitions, in_process_executor

from kohaku_assets.assets import ALL_ASSETS
from kohaku_assets.jobs import JOBS
from kohaku_assets.resources import KohakuSettings
from kohaku_assets.schedules import SCHEDULES
from kohaku_assets.sensors import SENSORS
from kohaku_rag.models import ModelPool

defs = Definitions(
    assets=ALL_ASSETS,
    jobs=JOBS,
    sensors=SENSORS,
    schedules=SCHEDULES,
    # One model pool per code-server process: the sensors and in-process runs share it.
    resources={"settings": KohakuSettings(), "models": ModelPool()},
    # Materializations started from the asset graph (not one of JOBS) also run every step in
    # the run's process: one process per run, not one per step (see kohaku_assets.jobs).
    executor=in_process_executor,
)
