"""The Dagster code location that `workspace.yaml` loads."""

from dagster import (
    AssetSelection,
    AutomationConditionSensorDefinition,
    DefaultSensorStatus,
    Definitions,
    in_process_executor,
)

from kohaku_assets.assets import ALL_ASSETS
from kohaku_assets.jobs import JOBS
from kohaku_assets.resources import PROCESS_MODELS, KohakuSettings
from kohaku_assets.schedules import SCHEDULES
from kohaku_assets.sensors import SENSORS

# Replaces Dagster's implicit sensor of that name, which starts stopped: the indexes'
# re-assembly and the leaderboard's refresh are automation conditions, so they need it on.
automation_sensor = AutomationConditionSensorDefinition(
    "default_automation_condition_sensor",
    target=AssetSelection.all(),
    default_status=DefaultSensorStatus.RUNNING,
    # Dagster 1.13 runs what automation requests as asset materializations, not as one of the
    # named jobs: the tag lets the Runs page filter them (kohaku/trigger=automation).
    run_tags={"kohaku/trigger": "automation"},
    # Dagster's sensor loop runs every 5 s; evaluating these conditions takes ~0.1 s on a lake
    # (bench/serving/ui_smoke.py: click → searchable and click → leaderboard shortened by up to 25 s).
    minimum_interval_seconds=5,
    description="Evaluates the assets' automation conditions: re-assembles the indexes after document runs "
    "and refreshes the leaderboard after scores change (runs from the CLI, the sensors or a UI backfill).",
)

defs = Definitions(
    assets=ALL_ASSETS,
    jobs=JOBS,
    sensors=[*SENSORS, automation_sensor],
    schedules=SCHEDULES,
    # One model pool per code-server process: the sensors and in-process runs share it.
    resources={"settings": KohakuSettings(), "models": PROCESS_MODELS},
    # Materializations started from the asset graph (not one of JOBS) also run every step in
    # the run's process: one process per run, not one per step (see kohaku_assets.jobs).
    executor=in_process_executor,
)
