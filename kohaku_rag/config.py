"""Configuration as data: frozen dataclasses with a stable content hash.

A hash is the SHA-256 of the canonical JSON of the dataclass, so a key order change or a
file rename never invalidates anything, and any value change always does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from kohaku_rag.embed import EmbedderSpec

T = TypeVar("T")


def stable_hash(obj: Any, length: int = 16) -> str:
    payload = dataclasses.asdict(obj) if dataclasses.is_dataclass(obj) else obj
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:length]


def from_mapping(cls: type[T], data: dict[str, Any]) -> T:
    """Build a (possibly nested) frozen dataclass, refusing unknown keys with their names."""
    names = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ValueError(f"unknown {cls.__name__} keys {unknown}; known keys: {sorted(names)}")
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        ftype = names[key].type
        target = _NESTED.get(ftype if isinstance(ftype, str) else getattr(ftype, "__name__", ""))
        kwargs[key] = from_mapping(target, value) if target is not None and isinstance(value, dict) else value
    return cls(**kwargs)


@dataclass(frozen=True)
class IndexConfig:
    """Everything that changes what the index holds."""

    embedder: EmbedderSpec = field(default_factory=EmbedderSpec)
    # "weighted": a parent's vector is the length-weighted mean of its children (KohakuRAG);
    # "mean": the plain mean.
    parent_vector: Literal["weighted", "mean"] = "weighted"
    # Embed paragraphs from their own full text instead of propagating sentence vectors.
    embed_paragraph_text: bool = False
    use_outline: bool = False
    # Figure captioning: "ocr" (offline default), "vision" (OpenAI-compatible endpoint) or "none".
    captioner: Literal["ocr", "vision", "none"] = "ocr"
    vision_base_url: str = ""
    vision_model: str = ""
    vision_api_key_env: str | None = "OPENAI_API_KEY"
    # Index figure and table paragraphs; off gives a text-only index (the figures benchmark's baseline).
    media_nodes: bool = True
    vision_max_concurrent: int = 4
    vision_timeout: float = 60.0  # seconds per request
    vision_max_retries: int = 4  # on 429, 5xx, timeouts (Retry-After honoured)
    vision_prompt: str = ""  # empty: the paper's caption prompt (captions.CAPTION_PROMPT)

    @property
    def parse_hash(self) -> str:
        return stable_hash({"use_outline": self.use_outline})

    @property
    def caption_hash(self) -> str:
        parts: dict[str, object] = {"captioner": self.captioner, "url": self.vision_base_url, "model": self.vision_model,
                                    "media_nodes": self.media_nodes}
        if self.vision_prompt:  # only when set, so existing lakes keep their captions
            parts["prompt"] = self.vision_prompt
        return stable_hash(parts)

    @property
    def embed_hash(self) -> str:
        return stable_hash(
            {
                "embedder": dataclasses.asdict(self.embedder),
                "parent_vector": self.parent_vector,
                "embed_paragraph_text": self.embed_paragraph_text,
            }
        )


@dataclass(frozen=True)
class RetrievalConfig:
    """Retrieval settings shared by `kohaku search` and the answering pipeline."""

    top_k: int = 24  # dense hits per query and per kind (k applies after the kind filter)
    bm25_top_k: int = 24  # BM25 paragraph hits per query (0 disables BM25)
    top_k_final: int = 16  # context units kept after the cross-query rerank (~8,000 characters)
    rerank: Literal["frequency", "score", "combined"] = "combined"
    # "combined" ranks by alpha × (weighted) query frequency + (1 − alpha) × best score.
    alpha: float = 0.25
    # Weight of every query after the first (the planner's rewrites) against the question
    # itself, in score and frequency. Measured on WattBot train at the answering budget
    # (bench/qa_context.py): the bundled 1.5B planner's rewrites at full weight cut evidence
    # recall from 0.84 to 0.77; at 0.25 (with alpha 0.25) they add recall without displacing
    # the question's own hits.
    planned_query_weight: float = 0.25
    # Dense and BM25 hits are fused by weighted reciprocal rank. Tuned on WattBot train
    # (bench/index_wattbot.py): with the bundled MiniLM, dense retrieval alone is far weaker
    # than BM25, and an equal-weight hybrid loses to BM25; as a light tie-breaker over BM25
    # (0.1) it adds evidence recall. Raise dense_weight for a stronger embedder.
    rrf_k: float = 60.0
    bm25_weight: float = 1.0
    dense_weight: float = 0.1
    # Kinds searched densely, each on its own (k applies after the kind filter). Paragraph
    # vectors are the length-weighted means of their sentences; adding sentence hits
    # ("sentence", "paragraph") measured no better on WattBot train and costs 4x the time.
    dense_kinds: tuple[str, ...] = ("paragraph",)
    expand_to: Literal["paragraph", "section"] = "paragraph"
    dedup: Literal["none", "node_id", "tree"] = "tree"
    threshold: float = 0.0  # minimum dense cosine similarity for a dense hit to count
    budget_chars: int = 4000
    # Mark this many sentences of the context, those sharing the most (IDF-weighted) question
    # terms, so a small answering model finds the evidence inside long paragraphs (0: off).
    # With the bundled 1.5B model on WattBot train (single run): WattBot score 0.541 → 0.577.
    mark_sentences: int = 2


def load_config_file(path: Path, cls: type[T]) -> T:
    """Read a TOML or JSON config file into `cls`, with an error naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as exc:
        raise ValueError(f"config file {path}: {exc}") from exc
    try:
        return from_mapping(cls, data)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"config file {path}: {exc}") from exc


_NESTED: dict[str, type] = {"EmbedderSpec": EmbedderSpec}
