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


@runtime_checkable
class ImageEmbedder(Embedder, Protocol):
    """An Embedder that can also put images in its vector space (Jina v4): an optional
    capability, so `embeds_images` says whether this instance has it (a cache in front of a
    text-only model has the method but not the capability).

    `embed_images` takes encoded image files (PNG, JPEG, ...) and returns one L2-normalised
    row per image, comparable with the `query` vectors of `embed`.
    """

    @property
    def embeds_images(self) -> bool: ...

    def embed_images(self, images: Sequence[bytes]) -> np.ndarray: ...


def image_embedder(embedder: Embedder) -> ImageEmbedder | None:
    """`embedder` when it can embed images, else None (text-only: caption vectors stay)."""
    if isinstance(embedder, ImageEmbedder) and embedder.embeds_images:
        return embedder
    return None


def check_images(images: Sequence[bytes]) -> list[bytes]:
    """The images as a list of non-empty bytes (a str or an empty file is a caller's bug)."""
    if isinstance(images, (bytes, str)):
        raise TypeError("embed_images() takes a sequence of images, not a single one: wrap it in a list")
    items = list(images)
    for i, image in enumerate(items):
        if not isinstance(image, bytes):
            raise TypeError(f"images[{i}] is {type(image).__name__}, expected bytes")
        if not image:
            raise ValueError(f"images[{i}] is empty")
    return items


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
