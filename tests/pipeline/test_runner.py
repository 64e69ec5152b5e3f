"""The in-process runner (kohaku_assets.runner): runs of a subset of a job's assets."""

from __future__ import annotations

import json

import pytest
from dagster import AssetKey

from kohaku_assets.cli import main as cli_main
from kohaku_assets.instance import instance_for
from kohaku_assets.resources import KohakuSettings
from kohaku_assets.runner import run_index, run_job


@pytest.fixture()
def env(tmp_path, corpus, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "lake" / ".dagster"))
    return KohakuSettings(lake_root=str(tmp_path / "lake"), corpus_dir=str(corpus)), corpus


def quiet(_msg: str) -> None:
    pass


def test_a_subset_of_the_assembly_job_runs_with_the_processs_models(env):
    """A subset of the assembly job runs with the process's own `models` resource (no
    DagsterInvalidDefinitionError about a resource provided twice)."""
    settings, _ = env
    run_index(settings, progress=quiet)
    result = run_job(settings, "assemble_indexes", asset_selection=[AssetKey("vector_index")])
    assert result.success
    run = instance_for(settings.lake.root).get_run_by_id(result.run_id)
    assert run is not None and run.job_name == "assemble_indexes"
    assert run.asset_selection == {AssetKey("vector_index")}
    done = {e.asset_key for e in result.get_asset_materialization_events() if e.asset_key is not None}
    assert done == {AssetKey("vector_index")}


def test_deleting_the_vector_file_is_repaired_by_the_next_index(env, capsys):
    """With only the vector file gone, the next `kohaku index` re-assembles it alone and search
    finds the documents again."""
    settings, corpus = env
    args = ["--lake", settings.lake_root, "--corpus", str(corpus)]
    assert cli_main(["index", *args]) == 0
    settings.lake.vectors_path.unlink()
    assert cli_main(["index", *args, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["recomputed"] == 0 and summary["nodes"]["document"] == 3
    assert cli_main(["search", "How much water per kWh?", *args, "--json"]) == 0
    items = json.loads(capsys.readouterr().out)
    assert items and items[0]["doc_id"] == "water"
