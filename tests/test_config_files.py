"""Config files: TOML/JSON reading, strict dataclass building, named config folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kohaku_rag.config_files import from_mapping, load_config_file, named_files, read_config_data, stable_hash
from kohaku_rag.embed import EmbedderSpec
from kohaku_rag.indexing.index_config import IndexConfig


def test_read_config_data_reads_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "a.toml"
    toml.write_text('captioner = "none"\n\n[embedder]\nbackend = "openai"\nbatch_size = 8\n')
    assert read_config_data(toml) == {"captioner": "none", "embedder": {"backend": "openai", "batch_size": 8}}
    js = tmp_path / "b.json"
    js.write_text(json.dumps({"captioner": "none", "embedder": {"backend": "openai", "batch_size": 8}}))
    assert read_config_data(js) == read_config_data(toml)


@pytest.mark.parametrize(
    ("name", "text", "why"),
    [
        ("broken.toml", "captioner = ", "Invalid value"),
        ("broken.json", '{"captioner": ', "Expecting value"),
        ("list.json", "[1, 2]", "expected a table of keys, got list"),
    ],
)
def test_read_config_data_errors_name_the_file(tmp_path: Path, name: str, text: str, why: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError, match=why) as err:
        read_config_data(path)
    assert str(err.value).startswith(f"config file {path}: ")
    with pytest.raises(ValueError, match=f"config file {tmp_path / 'absent.toml'}"):
        read_config_data(tmp_path / "absent.toml")


def test_from_mapping_builds_nested_dataclasses() -> None:
    cfg = from_mapping(IndexConfig, {"captioner": "none", "embedder": {"backend": "openai", "dimensions": 256}})
    assert cfg == IndexConfig(captioner="none", embedder=EmbedderSpec(backend="openai", dimensions=256))
    assert isinstance(cfg.embedder, EmbedderSpec)
    assert from_mapping(IndexConfig, {}) == IndexConfig()


def test_from_mapping_refuses_unknown_keys_by_name() -> None:
    with pytest.raises(ValueError, match=r"unknown IndexConfig keys \['captoner', 'zzz'\]") as err:
        from_mapping(IndexConfig, {"captoner": "none", "zzz": 1, "use_outline": True})
    assert "captioner" in str(err.value)  # the known keys are listed to pick from
    with pytest.raises(ValueError, match=r"unknown EmbedderSpec keys \['modell'\]"):
        from_mapping(IndexConfig, {"embedder": {"modell": "x"}})


def test_load_config_file_names_the_file_and_the_key(tmp_path: Path) -> None:
    good = tmp_path / "index.toml"
    good.write_text('captioner = "none"\n[embedder]\nbackend = "e5"\nmodel = "original"\n')
    assert load_config_file(good, IndexConfig) == IndexConfig(
        captioner="none", embedder=EmbedderSpec(backend="e5", model="original")
    )
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"embedder": {"backnd": "e5"}}))
    with pytest.raises(ValueError, match=r"bad\.json.*backnd"):
        load_config_file(bad, IndexConfig)


def test_named_files_refuses_a_name_defined_twice(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text("")
    (tmp_path / "b.json").write_text("{}")
    (tmp_path / ".hidden.toml").write_text("")
    (tmp_path / "notes.txt").write_text("")
    assert named_files(tmp_path, "config") == {"a": tmp_path / "a.toml", "b": tmp_path / "b.json"}
    assert named_files(tmp_path / "absent", "config") == {}
    (tmp_path / "a.json").write_text("{}")
    with pytest.raises(ValueError, match=r"config 'a' is defined twice: a\.json and a\.toml"):
        named_files(tmp_path, "config")


def test_stable_hash_ignores_key_order_and_follows_values() -> None:
    assert stable_hash({"a": 1, "b": 2}) == stable_hash({"b": 2, "a": 1})
    assert stable_hash(IndexConfig()) == stable_hash(IndexConfig())
    assert stable_hash(IndexConfig(captioner="none")) != stable_hash(IndexConfig())
    assert len(stable_hash({"a": 1})) == 16
