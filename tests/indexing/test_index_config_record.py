"""The lake records the index settings it was built with; reading it with others is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kohaku_assets.cli import main as cli_main
from kohaku_assets.resources import KohakuSettings
from kohaku_rag.embed import EmbedderSpec
from kohaku_rag.indexing.index_config import (
    IndexConfig,
    IndexConfigConflict,
    record_index_config,
    recorded_index_config,
    resolve_index_config,
)
from kohaku_rag.lake.layout import Lake


@pytest.fixture()
def lake(tmp_path: Path) -> Lake:
    root = tmp_path / "lake"
    root.mkdir()
    return Lake(root)


def test_record_round_trips(lake: Lake) -> None:
    assert recorded_index_config(lake) is None
    cfg = IndexConfig(captioner="none", use_outline=True, embedder=EmbedderSpec(backend="e5", model="original"))
    record_index_config(lake, cfg)
    assert recorded_index_config(lake) == cfg
    assert json.loads(lake.index_config_path.read_text())["embedder"]["backend"] == "e5"
    stamp = lake.index_config_path.stat().st_mtime_ns
    record_index_config(lake, cfg)  # unchanged settings leave the file alone
    assert lake.index_config_path.stat().st_mtime_ns == stamp
    record_index_config(lake, IndexConfig())
    assert recorded_index_config(lake) == IndexConfig()


def test_an_unreadable_record_says_how_to_fix_it(lake: Lake) -> None:
    lake.index_config_path.write_text(json.dumps({"captoner": "none"}))
    with pytest.raises(ValueError, match=r"unreadable index settings.*captoner.*kohaku index --index-config"):
        recorded_index_config(lake)


def test_resolve_uses_the_record_and_refuses_other_settings(lake: Lake) -> None:
    built = IndexConfig(captioner="none")
    record_index_config(lake, built)
    assert resolve_index_config(lake, None) == built
    assert resolve_index_config(lake, IndexConfig(captioner="none")) == built
    with pytest.raises(IndexConfigConflict, match=r"\(captioner\)") as err:
        resolve_index_config(lake, IndexConfig(captioner="ocr"), "index config ocr.toml")
    message = str(err.value)
    assert message.startswith("index config ocr.toml differs from the settings the lake")
    assert str(lake.index_config_path) in message and "kohaku index --index-config FILE" in message
    with pytest.raises(IndexConfigConflict, match=r"\(embedder\.backend, use_outline\)"):
        resolve_index_config(lake, IndexConfig(captioner="none", use_outline=False, embedder=EmbedderSpec("e5")))


def test_a_new_lake_takes_the_request(lake: Lake) -> None:
    asked = IndexConfig(captioner="vision", vision_model="m")
    assert resolve_index_config(lake, asked) == asked
    assert resolve_index_config(lake, None) == IndexConfig()
    assert not lake.index_config_path.exists()  # resolving never records


def test_cli_search_refuses_other_index_settings(tmp_path: Path, corpus: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "lake" / ".dagster"))
    monkeypatch.delenv("KOHAKU_INDEX_CONFIG", raising=False)
    none_cfg, ocr_cfg = tmp_path / "none.toml", tmp_path / "ocr.toml"
    none_cfg.write_text('captioner = "none"\n')
    ocr_cfg.write_text('captioner = "ocr"\n')
    args = ["--lake", str(tmp_path / "lake"), "--corpus", str(corpus)]
    assert cli_main(["index", *args, "--index-config", str(none_cfg), "--json"]) == 0
    capsys.readouterr()
    assert recorded_index_config(Lake(tmp_path / "lake")) == IndexConfig(captioner="none")

    question = "How much water per kWh?"
    assert cli_main(["search", question, *args, "--index-config", str(ocr_cfg), "--json"]) == 2
    err = capsys.readouterr().err
    assert "captioner" in err and str(ocr_cfg) in err
    assert "leave it out" in err and "kohaku index --index-config FILE" in err

    assert cli_main(["search", question, *args, "--index-config", str(none_cfg), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["doc_id"] == "water"
    assert cli_main(["search", question, *args, "--json"]) == 0  # the lake's own settings
    assert json.loads(capsys.readouterr().out)[0]["doc_id"] == "water"
    assert recorded_index_config(Lake(tmp_path / "lake")) == IndexConfig(captioner="none")  # searching records nothing
    assert KohakuSettings(lake_root=str(tmp_path / "lake")).index_config() == IndexConfig(captioner="none")
