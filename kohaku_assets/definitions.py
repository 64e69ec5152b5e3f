"""The Dagster code location that `workspace.yaml` loads."""

from dagster import Definitions

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
)
