"""Saved KV-cache states of prompt prefixes that repeat, so they are evaluated once.

Why: every planner call starts with the same chat header and system prompt, and so does
every answer call; the two alternate, so llama.cpp's own reuse (the KV of the last prompt)
never sees the repeat. A prefix's state is a few MB (28 KB per token for the bundled 1.5B
model), saved with llama.cpp's per-sequence state API and copied back before the rest of
the prompt is evaluated.

Why the split is fixed: logits depend in their last bits on how tokens were batched, so a
prompt with a shareable prefix is always evaluated as "prefix, then the rest" from an empty
cache, whether the prefix state was restored or just computed. A reply is then the same
whatever ran before it (see llama.py).

Why on disk too (`directory`): the fixed part of a prompt is the same for every process on a
machine, so `kohaku ask`, the first question of `kohaku eval` and a fresh `kohaku serve`
load it instead of evaluating it. A state file is named by a digest of `identity` (the model
file, the context's size, llama.cpp's version and CPU variant: whatever the KV bits depend on)
and the prefix tokens (so a changed prompt is another file, never a stale one). Each file
carries that digest in full (what it belongs to: a state of another prompt copied in its
place is refused) and the digest of its bytes; a damaged, refused or foreign file is deleted
and rebuilt. Anything else in the folder (no state's name, no state's header, a temporary
file a dead process left) is removed when the folder is first used and after each save.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import logging
import os
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from kohaku_rag.lake.atomic import atomic_path

__all__ = ["MIN_PREFIX_TOKENS", "PrefixStates", "state_digest", "state_file_name"]

log = logging.getLogger(__name__)

# Below this a saved state saves less than its copy costs.
MIN_PREFIX_TOKENS = 16
# A state file: this magic, the SHA-256 of what it belongs to (`state_digest`), the SHA-256
# of the state's bytes, the bytes. (Version 1 had no owner digest: such files are rebuilt.)
_MAGIC = b"KOHAKU-KV-STATE-2\n"
_DIGEST = 32
_HEADER = len(_MAGIC) + 2 * _DIGEST
# The names a state file has (state_file_name), and a temporary file of atomic_path.
_STATE_NAME = re.compile(r"^[0-9a-f]{40}\.kv$")
_TEMP_NAME = re.compile(r"^\.[0-9a-f]{40}\.kv\..*\.tmp$")
# A temporary file older than this is a write that died (a save takes well under a second).
_STALE_TEMP_SECONDS = 600
# State files kept per directory (the least recently used go first): ~10 MB each.
DISK_CAPACITY = 48


def state_digest(identity: str, prefix: tuple[int, ...]) -> bytes:
    """What a state belongs to: the model and context (`identity`) and the prefix tokens."""
    return hashlib.sha256(identity.encode("utf-8") + b"\0" + np.asarray(prefix, dtype="<i4").tobytes()).digest()


def state_file_name(identity: str, prefix: tuple[int, ...]) -> str:
    """The file a prefix's state is saved in, for a model and context described by `identity`."""
    return state_digest(identity, prefix).hex()[:40] + ".kv"


class PrefixStates:
    """An LRU of llama.cpp sequence states, keyed by the prefix tokens they hold."""

    def __init__(self, capacity: int = 8, directory: Path | None = None, identity: str = "") -> None:
        self.capacity = capacity
        # Where states are kept across processes (None: this process only), for `identity`.
        self.directory = directory
        self.identity = identity
        # prefix tokens -> (the state's buffer, its length in bytes), as llama.cpp wrote it
        self._states: OrderedDict[tuple[int, ...], tuple[ctypes.Array[ctypes.c_uint8], int]] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.disk_hits = 0  # of `hits`, states loaded from `directory`
        self._opened = False  # the directory tidied (junk removed) on first use

    def __len__(self) -> int:
        return len(self._states)

    def evaluate(self, ctx: Any, prefix: list[int], evaluate: Callable[[list[int]], None]) -> int:
        """Leave exactly `prefix` in the empty sequence 0 of `ctx` (decoding.py): restored
        if saved, else `evaluate`d and saved. Returns how many tokens were evaluated."""
        import llama_cpp

        key = tuple(prefix)
        saved = self._states.get(key)
        if saved is not None:
            if llama_cpp.llama_state_seq_set_data(ctx, *saved, 0):
                self._states.move_to_end(key)
                self.hits += 1
                return 0
            del self._states[key]
            llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), 0, -1, -1)
        loaded = self._read(key)
        if loaded is not None:
            if llama_cpp.llama_state_seq_set_data(ctx, *loaded, 0):
                self._remember(key, loaded)
                self.hits += 1
                self.disk_hits += 1
                return 0
            # Written by another build or for another context: rebuilt below.
            log.warning("prefix state %s was refused by llama.cpp; evaluating it again", self._path(key))
            llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(ctx), 0, -1, -1)
        self.misses += 1
        evaluate(prefix)
        self._save(ctx, key)
        return len(prefix)

    def _path(self, key: tuple[int, ...]) -> Path:
        assert self.directory is not None
        return self.directory / state_file_name(self.identity, key)

    def _read(self, key: tuple[int, ...]) -> tuple[ctypes.Array[ctypes.c_uint8], int] | None:
        """The state saved on disk for `key`, or None (absent, unreadable or damaged: a
        damaged file is deleted, so it is rebuilt)."""
        if self.directory is None:
            return None
        self._open()
        path = self._path(key)
        try:
            data = path.read_bytes()
        except OSError:
            return None
        problem = _problem(data, state_digest(self.identity, key))
        if problem is not None:
            log.warning("prefix state %s %s; deleted, evaluating it again", path, problem)
            path.unlink(missing_ok=True)
            return None
        body = data[_HEADER:]
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: kept when the directory is pruned
        return (ctypes.c_uint8 * len(body)).from_buffer_copy(body), len(body)

    def _write(self, key: tuple[int, ...], buffer: ctypes.Array[ctypes.c_uint8], size: int) -> None:
        """Save the state for other processes, whole or not at all (a temporary file renamed
        into place); a directory that cannot be written leaves the state in memory only."""
        if self.directory is None:
            return
        body = bytes(memoryview(buffer)[:size])
        try:
            with atomic_path(self._path(key)) as tmp:
                tmp.write_bytes(_MAGIC + state_digest(self.identity, key) + hashlib.sha256(body).digest() + body)
            self._prune()
        except OSError as exc:
            log.warning("prefix state not saved in %s (%s); it stays in this process only", self.directory, exc)

    def _open(self) -> None:
        """On first use, clear what an older version, a crash or a hand left in the folder."""
        if not self._opened:
            self._opened = True
            with contextlib.suppress(OSError):
                self._prune()

    def _prune(self) -> None:
        """Remove the folder's junk, then the least recently used states past DISK_CAPACITY."""
        assert self.directory is not None
        states = []
        for path in self.directory.iterdir():
            if not path.is_file() and not path.is_symlink():
                continue  # a folder is nobody's state, but not ours to delete either
            if _STATE_NAME.match(path.name) and _header_ok(path):
                states.append(path)
            elif not _TEMP_NAME.match(path.name) or time.time() - _mtime(path) > _STALE_TEMP_SECONDS:
                path.unlink(missing_ok=True)
        for old in sorted(states, key=_mtime, reverse=True)[DISK_CAPACITY:]:
            old.unlink(missing_ok=True)

    def _save(self, ctx: Any, key: tuple[int, ...]) -> None:
        import llama_cpp

        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0)
        if written:
            self._remember(key, (buffer, written))
            self._write(key, buffer, written)

    def _remember(self, key: tuple[int, ...], state: tuple[ctypes.Array[ctypes.c_uint8], int]) -> None:
        self._states[key] = state
        while len(self._states) > self.capacity:
            self._states.popitem(last=False)


def _problem(data: bytes, owner: bytes) -> str | None:
    """Why `data` is not the state of `owner` (state_digest), as a log line says it; None
    when it is: this version's header, the owner's digest, and its bytes' own digest."""
    if not data.startswith(_MAGIC) or len(data) < _HEADER:
        return "is damaged or from an older version"
    if data[len(_MAGIC) : len(_MAGIC) + _DIGEST] != owner:
        return "belongs to another prompt or model (copied in place of this one?)"
    if hashlib.sha256(data[_HEADER:]).digest() != data[len(_MAGIC) + _DIGEST : _HEADER]:
        return "is damaged"
    return None


def _header_ok(path: Path) -> bool:
    """A state file that can be read and starts as this version writes one (its full
    check, which reads every byte, waits for its load)."""
    try:
        with path.open("rb") as handle:
            header = handle.read(_HEADER)
    except OSError:
        return False
    return len(header) == _HEADER and header.startswith(_MAGIC)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:  # removed meanwhile by another process's prune
        return 0.0
