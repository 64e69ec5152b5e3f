"""The sweep_report asset follows the leaderboard (its automation condition), per sweep."""

from dagster import AssetKey, AssetMaterialization, DagsterInstance, evaluate_automation_conditions

from kohaku_assets.definitions import defs
from kohaku_assets.partitions import SWEEPS


def test_sweep_report_refreshes_after_the_leaderboard():
    instance = DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(SWEEPS, ["grid", "ablation"])
    first = evaluate_automation_conditions(defs, instance)
    assert first.get_num_requested(AssetKey("sweep_report")) == 0  # no leaderboard yet
    instance.report_runless_asset_event(AssetMaterialization("leaderboard"))
    second = evaluate_automation_conditions(defs, instance, cursor=first.cursor)
    assert second.get_num_requested(AssetKey("sweep_report")) == 2  # each sweep's partition
    for sweep in ("grid", "ablation"):
        instance.report_runless_asset_event(AssetMaterialization("sweep_report", partition=sweep))
    third = evaluate_automation_conditions(defs, instance, cursor=second.cursor)
    assert third.get_num_requested(AssetKey("sweep_report")) == 0
