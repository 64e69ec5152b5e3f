"""Every saved prefix state proves what it belongs to: a state file carries the digest of
its model identity and prefix tokens, so a file of another prompt put in place of the right
one is deleted and rebuilt (one log line), never loaded; files in the folder that are no
state files, or unreadable ones, are removed when the folder is opened. Real files in a
temporary folder (the states' bytes are made up: llama.cpp is not needed to store them)."""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import time
from pathlib import Path

import pytest

from kohaku_rag.llm.prefix_states import PrefixStates, state_file_name

IDENTITY = '["model.gguf", 512]'
PROMPT_A = tuple(range(100, 140))
PROMPT_B = tuple(range(200, 240))


def _state(text: bytes) -> tuple[ctypes.Array[ctypes.c_uint8], int]:
    return (ctypes.c_uint8 * len(text)).from_buffer_copy(text), len(text)


def _saved(folder: Path, key: tuple[int, ...], body: bytes) -> Path:
    states = PrefixStates(directory=folder, identity=IDENTITY)
    states._write(key, *_state(body))
    return folder / state_file_name(IDENTITY, key)


def test_a_state_of_another_prompt_in_the_right_place_is_deleted_not_loaded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """B's state under A's name is deleted, not loaded: a checksum of a file's own bytes is not
    enough, the file carries the digest of its prompt and model."""
    a = _saved(tmp_path, PROMPT_A, b"kv of prompt A" * 10)
    b = _saved(tmp_path, PROMPT_B, b"kv of prompt B" * 10)
    assert bytes(PrefixStates(directory=tmp_path, identity=IDENTITY)._read(PROMPT_A)[0]) == b"kv of prompt A" * 10  # type: ignore[index]
    shutil.copy(b, a)
    states = PrefixStates(directory=tmp_path, identity=IDENTITY)
    with caplog.at_level(logging.WARNING, logger="kohaku_rag.llm.prefix_states"):
        assert states._read(PROMPT_A) is None
    assert not a.exists() and b.exists()
    (line,) = [r.getMessage() for r in caplog.records]
    assert "\n" not in line and a.name in line and "belongs to another prompt or model" in line
    # the same state under another model identity is refused too
    b_other = tmp_path / state_file_name("another model", PROMPT_B)
    shutil.copy(b, b_other)
    assert PrefixStates(directory=tmp_path, identity="another model")._read(PROMPT_B) is None
    assert not b_other.exists()


def test_junk_in_the_states_folder_is_removed_when_it_is_opened(tmp_path: Path) -> None:
    """Anything in the states folder that is no state is removed, not only stale `*.kv` files."""
    kept = _saved(tmp_path, PROMPT_A, b"kv of prompt A" * 10)
    junk = [tmp_path / "notes.txt", tmp_path / "stray.kv", tmp_path / ("0" * 40 + ".kv")]
    junk[0].write_text("not a state")
    junk[1].write_bytes(b"KOHAKU-KV-STATE-2\n" + b"x" * 100)  # a name no state has
    junk[2].write_bytes(b"garbage, not a state file")
    stale_tmp = tmp_path / f".{kept.name}.abc123.tmp"  # a write that died long ago
    stale_tmp.write_bytes(b"half a state")
    hour_ago = time.time() - 3600
    os.utime(stale_tmp, (hour_ago, hour_ago))
    fresh_tmp = tmp_path / f".{kept.name}.def456.tmp"  # another process writing right now
    fresh_tmp.write_bytes(b"being written")
    cut_short = tmp_path / state_file_name(IDENTITY, PROMPT_B)  # the right name, no header
    cut_short.write_bytes(b"KOHAKU")

    states = PrefixStates(directory=tmp_path, identity=IDENTITY)
    assert states._read(PROMPT_A) is not None  # the first use opens the folder
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([kept.name, fresh_tmp.name]), left
