"""The embedding interface every backend implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

import numpy as np

Role = Literal["passage", "query"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 rows of shape (len(texts), dim).

    `model_id` names the model *and* every setting that changes its vectors (task
    adapter, dimensions, prefix), because the embedding cache is keyed by it.
    `role` lets asymmetric models (e5, Jina) embed queries and passages differently.
    """

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str], *, role: Role = "passage") -> np.ndarray: ...


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def check_texts(texts: Sequence[str], role: str = "passage") -> list[str]:
    """The texts as a list, refusing a bare str (which would embed its characters) and an
    unknown role (which would silently open a separate cache namespace)."""
    if role not in ("passage", "query"):
        raise ValueError(f"role must be 'passage' or 'query', got {role!r}")
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not a single str: wrap it in a list")
    items = list(texts)
    for i, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] is {type(text).__name__}, expected str")
    return items
