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
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["MIN_PREFIX_TOKENS", "PrefixStates"]

# Below this a saved state saves less than its copy costs.
MIN_PREFIX_TOKENS = 16


class PrefixStates:
    """An LRU of llama.cpp sequence states, keyed by the prefix tokens they hold."""

    def __init__(self, capacity: int = 8) -> None:
        self.capacity = capacity
        # prefix tokens -> (the state's buffer, its length in bytes), as llama.cpp wrote it
        self._states: OrderedDict[tuple[int, ...], tuple[ctypes.Array[ctypes.c_uint8], int]] = OrderedDict()
        self.hits = 0
        self.misses = 0

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
        self.misses += 1
        evaluate(prefix)
        self._save(ctx, key)
        return len(prefix)

    def _save(self, ctx: Any, key: tuple[int, ...]) -> None:
        import llama_cpp

        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0)
        if written:
            self._states[key] = (buffer, written)
            while len(self._states) > self.capacity:
                self._states.popitem(last=False)
