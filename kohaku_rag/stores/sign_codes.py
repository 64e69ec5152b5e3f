"""Sign codes for the "binary" vector search: 1 bit per dimension for a Hamming ranking in
memory, and an int8 copy of each vector to re-rank the best candidates (see vectors.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Codes:
    """One kind's sign codes in memory: rowids, each row's document, packed words."""

    ids: np.ndarray  # (n,) int64 rowids
    doc_names: np.ndarray  # (d,) str, sorted
    doc_index: np.ndarray  # (n,) index into doc_names
    words: np.ndarray  # (n, w) uint64 (or uint8 when dim is not a multiple of 64)


def sign_code(vec: np.ndarray) -> bytes:
    """1 bit per dimension: set where the component is positive."""
    return np.packbits(np.asarray(vec) > 0).tobytes()


def quantised(vec: np.ndarray) -> tuple[bytes, bytes, float]:
    """The sign code, and the vector as int8 with its scale (v ~= q8 * scale)."""
    peak = float(np.max(np.abs(vec))) or 1.0
    q8 = np.clip(np.rint(vec * (127.0 / peak)), -127, 127).astype(np.int8)
    return sign_code(vec), q8.tobytes(), peak / 127.0


def as_words(packed: np.ndarray) -> np.ndarray:
    """Packed bytes as uint64 words when they divide evenly (8x fewer XOR/popcount ops)."""
    return packed.view(np.uint64) if packed.shape[1] % 8 == 0 else packed


def sign_words(query: np.ndarray) -> np.ndarray:
    return as_words(np.frombuffer(sign_code(query), dtype=np.uint8).reshape(1, -1))
