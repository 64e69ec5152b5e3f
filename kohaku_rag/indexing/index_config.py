"""The index config: everything that changes what the index holds, with per-step hashes."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Annotated, Literal

from kohaku_rag.config_files import RETRIES, SECONDS, Range, from_mapping, read_config_data, stable_hash
from kohaku_rag.embed import EmbedderSpec
from kohaku_rag.errors import KohakuError
from kohaku_rag.http_retry import redact_url, redact_urls
from kohaku_rag.indexing.download import DownloadPolicy
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import write_bytes_atomic
from kohaku_rag.llm import LLMSpec


@dataclass(frozen=True)
class IndexConfig:
    """Everything that changes what the index holds."""

    embedder: EmbedderSpec = field(default_factory=EmbedderSpec)
    # "weighted": a parent's vector is the length-weighted mean of its children (KohakuRAG);
    # "mean": the plain mean.
    parent_vector: Literal["weighted", "mean"] = "weighted"
    # Embed paragraphs from their own full text instead of propagating sentence vectors.
    embed_paragraph_text: bool = False
    # Sections from the PDF outline (bookmarks) where it has one; layout finds the rest.
    use_outline: bool = True
    # Figure captioning: "ocr" (offline default), "vision" (OpenAI-compatible endpoint) or "none".
    captioner: Literal["ocr", "vision", "none"] = "ocr"
    vision_base_url: str = ""
    vision_model: str = ""
    vision_api_key_env: str | None = "OPENAI_API_KEY"
    # Index figure and table paragraphs; off gives a text-only index (the figures benchmark's baseline).
    media_nodes: bool = True
    vision_max_concurrent: Annotated[int, Range(1, 1024)] = 4
    vision_timeout: Annotated[float, SECONDS] = 60.0  # seconds per request
    vision_max_retries: Annotated[int, RETRIES] = 4  # on 429, 5xx, timeouts (Retry-After honoured)
    vision_prompt: str = ""  # empty: the paper's caption prompt (captions.CAPTION_PROMPT)
    # Index a document's reference list (its "References"/"Bibliography" section); off keeps
    # citations from crowding out the text that states an answer.
    index_references: bool = True
    # Documents downloaded from metadata.csv URLs (indexing.download); they change no hash.
    download_max_bytes: Annotated[int, Range(1, 10_000_000_000)] = 50_000_000  # a larger body is refused
    # Seconds for a whole download, however slow the server.
    download_timeout: Annotated[float, Range(0.0, 86_400.0, low_open=True)] = 120.0
    download_allow_private_hosts: bool = False  # loopback/private addresses (an intranet)
    download_allow_cross_host_redirects: bool = False
    # Documents `kohaku index` downloads at once (indexing.prefetch).
    download_concurrency: Annotated[int, Range(1, 64)] = 4
    # Dense search: "exact" (sqlite-vec brute force) or "binary" (in-memory sign codes ranked by
    # Hamming distance, the best candidates re-scored exactly: the step for 100x the WattBot
    # corpus, stores.vectors). Changes no stored vector: switching re-assembles nothing else.
    vector_search: Literal["exact", "binary"] = "exact"
    # Figure vectors when the embedder embeds images (jina-embeddings-v4; indexing.figure_vectors):
    # "image" — the figure's image vector; "image+caption" — the mean of the image vector and
    # its caption's text vector; "caption" — caption text only (what a text-only embedder does).
    figure_vectors: Literal["image", "image+caption", "caption"] = "image"
    # Render every PDF page and index it as a text-less `page` node searched by its image
    # vector (ColPali-style; parse.pdf_pages), for scanned or figure-heavy documents. Needs an
    # embedder that embeds images.
    page_images: bool = False
    # Tables kept as records (table_record.py): caption, column names, rows as sentence nodes
    # naming their columns, a box per PDF cell (the ask page marks the cited cell); a table
    # that cannot be aligned stays in the running text. On by default since 2026-11-28: with
    # the bundled 1.5B model on WattBot train + dev (one run each, paired with the text lake)
    # 0.662 -> 0.676, +0.014 [-0.005, +0.036] (2026 rule +0.020 [+0.003, +0.041]), Table
    # questions right 6 -> 7 of 23 (docs/benchmarks/settings.md). The first version, which
    # set unaligned tables apart as raw lines, lost -0.027 [-0.061, +0.007].
    table_records: bool = True
    # A text table the parser could not align is written out as rows and columns by a model,
    # once per table, and kept only when the code can check it: every cell copied from the
    # table's text in order, a consistent shape, no number the text lacks (table_repair.py).
    # Runs as the per-document `table_repairs` asset after the tree; the tree reads the
    # accepted repairs at its next build. Off by default: it costs a model call per table.
    table_repair: bool = False
    table_repair_llm: LLMSpec = field(default_factory=LLMSpec)

    @property
    def repair_model(self) -> str:
        """The repairing model as a repair's key names it (never a credential)."""
        llm = self.table_repair_llm
        return f"{llm.backend}:{llm.model}:{redact_url(llm.base_url or '')}"

    def __post_init__(self) -> None:
        if self.page_images and not self.embedder.embeds_images:
            raise ValueError(
                'page_images = true needs an embedder that embeds images: [embedder] backend = "jina", '
                'model = "jina-embeddings-v4"'
            )

    @property
    def download_policy(self) -> DownloadPolicy:
        return DownloadPolicy(
            max_bytes=self.download_max_bytes,
            timeout=self.download_timeout,
            allow_private_hosts=self.download_allow_private_hosts,
            allow_cross_host_redirects=self.download_allow_cross_host_redirects,
        )

    @property
    def parse_hash(self) -> str:
        parts: dict[str, object] = {"use_outline": self.use_outline}
        if not self.index_references:  # only when set, so existing lakes keep their trees
            parts["index_references"] = False
        if self.page_images:
            parts["page_images"] = True
        if self.table_records:  # only when set, so existing lakes keep their trees
            # 2: a table that cannot be aligned stays in the running text (payload.py);
            # 3: a cell keeps its unit ("64.7 GB"), one-letter column names (text_tables.py)
            # 4: more tables aligned (ranges, citations, numbered and multi-word names) and
            # fewer wrong ones (charts' legends and axes, sentences) (text_tables.py)
            parts["table_records"] = 4
        return stable_hash(parts)

    @property
    def caption_hash(self) -> str:
        parts: dict[str, object] = {
            "captioner": self.captioner,
            "url": redact_url(self.vision_base_url),  # never a credential: a new key keeps the captions
            "model": self.vision_model,
            "media_nodes": self.media_nodes,
        }
        if self.vision_prompt:  # only when set, so existing lakes keep their captions
            parts["prompt"] = self.vision_prompt
        return stable_hash(parts)

    @property
    def embed_hash(self) -> str:
        parts: dict[str, object] = {
            "embedder": dataclasses.asdict(redact_urls(self.embedder)),  # never a credential
            "parent_vector": self.parent_vector,
            "embed_paragraph_text": self.embed_paragraph_text,
        }
        if self.embedder.embeds_images:  # only then does it change a vector
            parts["figure_vectors"] = self.figure_vectors
        return stable_hash(parts)


# ── the settings a lake was built with ──────────────────────────────────────


class IndexConfigConflict(KohakuError):
    """A command was given index settings other than those the lake was built with."""


def recorded_index_config(lake: Lake) -> IndexConfig | None:
    """The index settings recorded when the lake was (last) indexed; None for a new lake."""
    path = lake.index_config_path
    if not path.exists():
        return None
    try:
        return from_mapping(IndexConfig, read_config_data(path))
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{path}: unreadable index settings ({exc}); re-index with kohaku index --index-config FILE"
        ) from exc


def record_index_config(lake: Lake, cfg: IndexConfig) -> None:
    """Remember `cfg` as the lake's index settings (only indexing changes them), without the
    credentials written into its URLs: the process that was given them keeps them in memory."""
    text = json.dumps(dataclasses.asdict(redact_urls(cfg)), indent=2, sort_keys=True) + "\n"
    path = lake.index_config_path
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        write_bytes_atomic(path, text.encode())


def differing_keys(a: IndexConfig, b: IndexConfig) -> list[str]:
    flat_a, flat_b = _flat(dataclasses.asdict(redact_urls(a))), _flat(dataclasses.asdict(redact_urls(b)))
    return sorted(k for k in flat_a.keys() | flat_b.keys() if flat_a.get(k) != flat_b.get(k))


def _flat(data: dict[str, object], prefix: str = "") -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def resolve_index_config(lake: Lake, requested: IndexConfig | None, origin: str = "--index-config") -> IndexConfig:
    """The settings to read the lake with: what it records. A request that matches (or no
    request) is fine; one that differs is refused, since searching with another embedder
    than the index was built with returns nonsense. A new lake takes the request (or the
    defaults)."""
    recorded = recorded_index_config(lake)
    if recorded is None:
        return requested or IndexConfig()
    if requested is None:
        return recorded
    if redact_urls(requested) == redact_urls(recorded):  # the lake records URLs without credentials
        return requested
    keys = ", ".join(differing_keys(recorded, requested))
    raise IndexConfigConflict(
        f"{origin} differs from the settings the lake {lake.root} was built with ({keys}); "
        f"leave it out to use the lake's own ({lake.index_config_path}), or re-index with "
        f"`kohaku index --index-config FILE` to change them"
    )
