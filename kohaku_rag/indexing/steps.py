"""Per-document indexing steps (the plan of what must be rebuilt: index_plan.py).

Each function is one step of one document; the Dagster layer calls them from its
partitioned assets, and tests and benchmarks call them directly. Every table a step
writes carries the version it was built from in its Parquet metadata, which is how an
unchanged document is recognised and skipped.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from kohaku_rag.document.tree import (
    Attachment,
    Node,
    NodeKind,
    ParsedDocument,
    build_tree,
    media_hash,
    nodes_to_table,
    table_to_nodes,
)
from kohaku_rag.embed.base import Embedder
from kohaku_rag.indexing.captions import CaptionCache, Captioner, caption_many_cached
from kohaku_rag.indexing.corpus import SourceDocument, load_document
from kohaku_rag.indexing.failures import clear_failure
from kohaku_rag.indexing.figure_vectors import figure_vectors
from kohaku_rag.indexing.index_config import IndexConfig
from kohaku_rag.indexing.propagate import propagate
from kohaku_rag.indexing.table_repair import read_repairs, repair_lookup, repairs_digest
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.tables import parquet_metadata, write_bytes_atomic, write_parquet_atomic
from kohaku_rag.parse.limits import MAX_TABLE_ROWS
from kohaku_rag.parse.pdf import is_references
from kohaku_rag.parse.pdf_pages import page_section
from kohaku_rag.parse.sentences import split_sentences
from kohaku_rag.web_links import web_link

# Bump when a step's output changes for the same input, so old partitions rebuild.
PARSER_VERSION = "5"  # 5: PDF sentences keep their line rectangles (page highlights); table_records: parse_hash
EMBED_VERSION = "1"

# Asset (= lake table) names, shared by the library and the Dagster layer.
SOURCES = "source_document"
TREES = "document_tree"
CAPTIONS = "captions"
LEAF_EMBEDDINGS = "leaf_embeddings"
NODE_EMBEDDINGS = "node_embeddings"
INDEX_ROWS = "index_rows"

_log = logging.getLogger("kohaku")
VERSION_KEY = "kohaku_version"
TABLES_CUT_KEY = "kohaku.tables_cut"  # a tree's tables cut to MAX_TABLE_ROWS, one line each (JSON)


def vector_schema(dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("node_id", pa.string(), nullable=False),
            pa.field("kind", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dim), nullable=False),
        ]
    )


SOURCE_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("format", pa.string(), nullable=False),
        pa.field("content_hash", pa.string(), nullable=False),
        pa.field("title", pa.string(), nullable=False),
        pa.field("url", pa.string(), nullable=False),
    ]
)

CAPTION_SCHEMA = pa.schema(
    [
        pa.field("node_id", pa.string(), nullable=False),
        pa.field("media_hash", pa.string(), nullable=False),
        pa.field("page", pa.int32()),
        pa.field("pdf_caption", pa.string(), nullable=False),
        pa.field("caption", pa.string(), nullable=False),
        pa.field("captioner", pa.string(), nullable=False),
        pa.field("error", pa.string()),
    ]
)


# ---------------------------------------------------------------- versions


def tree_version(source_hash: str, cfg: IndexConfig, repaired: str = "") -> str:
    """`repaired`: the digest of the document's accepted table repairs (`repaired_of`)."""
    if repaired:  # only then, so a lake without repairs keeps its trees
        return _digest(source_hash, cfg.parse_hash, PARSER_VERSION, repaired)
    return _digest(source_hash, cfg.parse_hash, PARSER_VERSION)


def captions_version(source_hash: str, cfg: IndexConfig, repaired: str = "") -> str:
    return _digest(tree_version(source_hash, cfg, repaired), cfg.caption_hash)


def embeddings_version(source_hash: str, cfg: IndexConfig, repaired: str = "") -> str:
    return _digest(captions_version(source_hash, cfg, repaired), cfg.embed_hash, EMBED_VERSION)


def repaired_of(lake: Lake, doc_id: str, cfg: IndexConfig) -> str:
    """What a document's tree reads of its table repairs ("" when repairs are off or none)."""
    return repairs_digest(lake, doc_id) if cfg.table_repair and cfg.table_records else ""


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:20]


def stored_dim(lake: Lake, doc_id: str) -> int | None:
    """Vector dimension of a document's index rows (read from the Parquet schema only)."""
    path = lake.table(INDEX_ROWS, doc_id)
    return pq.read_schema(path).field("vector").type.list_size if path.exists() else None


def stored_version(lake: Lake, asset: str, doc_id: str) -> str | None:
    return parquet_metadata(lake.table(asset, doc_id)).get(VERSION_KEY)


def bm25_tokens_path(lake: Lake, doc_id: str) -> Path:
    return lake.cache_dir / "bm25_tokens" / f"{doc_id}.parquet"


def remove_document(lake: Lake, doc_id: str) -> None:
    """Drop a document's per-document tables (the indexes drop it at their next assembly)."""
    for asset in (SOURCES, TREES, CAPTIONS, LEAF_EMBEDDINGS, NODE_EMBEDDINGS, INDEX_ROWS):
        lake.table(asset, doc_id).unlink(missing_ok=True)
    bm25_tokens_path(lake, doc_id).unlink(missing_ok=True)
    clear_failure(lake, doc_id)


# ---------------------------------------------------------------- steps


def write_source(lake: Lake, source: SourceDocument) -> None:
    row = {
        "doc_id": source.doc_id,
        "path": str(source.path),
        "format": source.format,
        "content_hash": source.content_hash,
        "title": source.title,
        "url": source.meta.url,
    }
    table = pa.Table.from_pylist([row], schema=SOURCE_SCHEMA)
    write_parquet_atomic(table, lake.table(SOURCES, source.doc_id), {VERSION_KEY: source.content_hash})


def read_source(lake: Lake, doc_id: str) -> dict[str, str]:
    path = lake.table(SOURCES, doc_id)
    if not path.exists():
        raise FileNotFoundError(f"no source record for {doc_id}; materialize source_document[{doc_id}] first")
    row: dict[str, str] = pq.read_table(path).to_pylist()[0]
    # a lake indexed before metadata URLs were checked may hold any scheme; none leaves as a link
    return {**row, "url": web_link(row.get("url"))}


def build_document_tree(lake: Lake, source: SourceDocument, cfg: IndexConfig) -> tuple[list[Node], bool]:
    """Parse a document into its tree and store figure images by content hash.

    Returns (nodes, reused): an up-to-date stored tree is reused rather than re-parsed.
    """

    repaired = repaired_of(lake, source.doc_id, cfg)
    version = tree_version(source.content_hash, cfg, repaired)
    path = lake.table(TREES, source.doc_id)
    if stored_version(lake, TREES, source.doc_id) == version:
        return table_to_nodes(pq.read_table(path)), True
    repair = repair_lookup(read_repairs(lake, source.doc_id), cfg.repair_model) if repaired else None
    parsed = load_document(source, use_outline=cfg.use_outline, tables=cfg.table_records, repair=repair)
    if not cfg.index_references:
        parsed = replace(parsed, sections=tuple(s for s in parsed.sections if not is_references(s.title)))
    if cfg.page_images and source.format == "pdf":
        parsed = replace(parsed, sections=(*parsed.sections, page_section(source.path)))
    for section in parsed.sections:
        for para in section.paragraphs:
            if para.image is not None:
                blob = lake.blob(media_hash(para.image))
                if not blob.exists():
                    write_bytes_atomic(blob, para.image)
    parsed, cut = _capped_tables(parsed)
    for line in cut:
        _log.warning("%s: %s", source.doc_id, line)
    nodes = build_tree(parsed, split_sentences)
    write_parquet_atomic(nodes_to_table(nodes), path, {VERSION_KEY: version, TABLES_CUT_KEY: json.dumps(cut)})
    return nodes, False


def _capped_tables(parsed: ParsedDocument) -> tuple[ParsedDocument, list[str]]:
    """The document with each table cut to its first `MAX_TABLE_ROWS` rows, and one line per
    table cut saying what was kept."""
    cut: list[str] = []
    sections = []
    for section in parsed.sections:
        paragraphs = []
        for para in section.paragraphs:
            table = para.table
            if table is not None and len(table.rows) > MAX_TABLE_ROWS:
                name = table.label or f"a table in section {section.title.strip()!r}"
                cut.append(f"{name}: kept the first {MAX_TABLE_ROWS:,} of its {len(table.rows):,} rows")
                para = replace(para, table=replace(table, rows=table.rows[:MAX_TABLE_ROWS]))
            paragraphs.append(para)
        sections.append(replace(section, paragraphs=tuple(paragraphs)))
    return (replace(parsed, sections=tuple(sections)), cut) if cut else (parsed, [])


def tables_cut(lake: Lake, doc_id: str) -> list[str]:
    """What the cap on table rows cut from a document's stored tree, one line per table."""
    raw = parquet_metadata(lake.table(TREES, doc_id)).get(TABLES_CUT_KEY)
    return list(json.loads(raw)) if raw else []


def read_tree(lake: Lake, doc_id: str) -> list[Node]:
    return table_to_nodes(pq.read_table(lake.table(TREES, doc_id)))


@dataclass(frozen=True)
class CaptionStats:
    figures: int
    cache_hits: int
    caption_chars: int
    captioner_chars: int  # what the captioner (OCR or vision model) added to the PDF captions
    errors: dict[str, str]  # node_id → reason; such a figure keeps its PDF caption only


def _read_blob(lake: Lake, digest: str) -> bytes | OSError:
    try:
        return lake.blob(digest).read_bytes()
    except OSError as exc:  # a lake blob deleted by hand: this figure fails alone
        return exc


def caption_figures(
    lake: Lake, doc_id: str, nodes: Sequence[Node], captioner: Captioner | None, version: str
) -> CaptionStats:
    """Caption every figure of a document (cached by image hash, captioner and PDF caption).

    A figure whose image cannot be read or captioned is reported and keeps its PDF caption;
    the other figures are unaffected.
    """

    figures = [n for n in nodes if n.kind is NodeKind.PARAGRAPH and n.attachment is Attachment.IMAGE and n.media_hash]
    results: list[tuple[str, bool] | Exception] = []
    if captioner is not None and figures:
        images = [_read_blob(lake, n.media_hash or "") for n in figures]
        readable = [(img, n.text) for img, n in zip(images, figures, strict=True) if isinstance(img, bytes)]
        captioned = iter(caption_many_cached(captioner, CaptionCache(lake.cache_dir / "captions"), readable))
        results = [next(captioned) if isinstance(img, bytes) else img for img in images]
    rows, errors, hits = [], {}, 0
    for k, node in enumerate(figures):
        result = results[k] if results else (node.text, False)
        if isinstance(result, Exception):
            errors[node.node_id] = f"{type(result).__name__}: {result}"
            text, error = node.text, errors[node.node_id]
        else:
            text, error = result[0], None
            hits += int(result[1])
        rows.append(
            {
                "node_id": node.node_id,
                "media_hash": node.media_hash,
                "page": node.page,
                "pdf_caption": node.text,
                "caption": text,
                "captioner": captioner.captioner_id if captioner else "none",
                "error": error,
            }
        )
    write_parquet_atomic(
        pa.Table.from_pylist(rows, schema=CAPTION_SCHEMA), lake.table(CAPTIONS, doc_id), {VERSION_KEY: version}
    )
    captions = [(str(r["caption"]), str(r["pdf_caption"] or "")) for r in rows]
    added = sum(max(0, len(caption) - len(pdf)) for caption, pdf in captions)
    return CaptionStats(len(figures), hits, sum(len(caption) for caption, _ in captions), added, errors)


# Marks the version of a document whose figures could not all be captioned (a vision
# endpoint was down, say): it stays out of date, so the next index run retries them.
INCOMPLETE = "+captions-incomplete"


def caption_errors(lake: Lake, doc_id: str) -> dict[str, str]:
    """node_id → why its caption failed, from the document's caption table."""
    path = lake.table(CAPTIONS, doc_id)
    if not path.exists():
        return {}
    return {
        r["node_id"]: r["error"] for r in pq.read_table(path, columns=["node_id", "error"]).to_pylist() if r["error"]
    }


def read_captions(lake: Lake, doc_id: str) -> dict[str, str]:
    """node_id → caption text (empty when the document has no caption table)."""
    path = lake.table(CAPTIONS, doc_id)
    if not path.exists():
        return {}
    return {r["node_id"]: r["caption"] for r in pq.read_table(path).to_pylist() if r["caption"]}


def apply_captions(nodes: Sequence[Node], captions: Mapping[str, str], *, keep_textless: bool = False) -> list[Node]:
    """The indexed tree: figure paragraphs take their caption text and get sentences;
    figures with no text at all are left out (nothing to search), unless `keep_textless`
    (their image gets a vector: that is something to search)."""
    out: list[Node] = []
    for node in nodes:
        if node.kind is NodeKind.SENTENCE and node.attachment is Attachment.IMAGE and node.parent_id in captions:
            continue  # replaced by the caption's sentences below
        if node.kind is NodeKind.PARAGRAPH and node.attachment is Attachment.IMAGE:
            text = captions.get(node.node_id, node.text)
            if not text.strip() and not (keep_textless and node.media_hash):
                continue
            node = replace(node, text=text)
            out.append(node)
            if node.node_id in captions:
                for k, sent in enumerate(split_sentences(text), start=1):
                    out.append(
                        Node(
                            f"{node.node_id}:s{k}",
                            node.doc_id,
                            node.node_id,
                            NodeKind.SENTENCE,
                            k,
                            "",
                            sent,
                            node.page,
                            None,
                            Attachment.IMAGE,
                        )
                    )
            continue
        out.append(node)
    return out


def indexed_tree(lake: Lake, doc_id: str, cfg: IndexConfig) -> list[Node]:
    image_vectors = cfg.embedder.embeds_images and cfg.figure_vectors != "caption"
    nodes = apply_captions(read_tree(lake, doc_id), read_captions(lake, doc_id), keep_textless=image_vectors)
    return nodes if cfg.media_nodes else [n for n in nodes if n.attachment is Attachment.TEXT]


def embed_leaves(nodes: Sequence[Node], embedder: Embedder, cfg: IndexConfig) -> tuple[list[str], np.ndarray]:
    """Vectors for sentences (and paragraphs, when they are embedded from their own text)."""
    kinds = {NodeKind.SENTENCE} | ({NodeKind.PARAGRAPH} if cfg.embed_paragraph_text else set())
    leaves = [n for n in nodes if n.kind in kinds and n.text.strip()]
    if not leaves:
        return [], np.zeros((0, embedder.dim), dtype=np.float32)
    return [n.node_id for n in leaves], embedder.embed([n.text for n in leaves], role="passage")


def vectors_table(ids: Sequence[str], kinds: Sequence[str], matrix: np.ndarray) -> pa.Table:
    dim = matrix.shape[1]
    flat = pa.array(np.ascontiguousarray(matrix, dtype=np.float32).reshape(-1), type=pa.float32())
    column = pa.FixedSizeListArray.from_arrays(flat, dim)
    return pa.Table.from_arrays(
        [pa.array(ids, pa.string()), pa.array(kinds, pa.string()), column], schema=vector_schema(dim)
    )


def read_vectors(lake: Lake, asset: str, doc_id: str) -> tuple[list[str], list[str], np.ndarray]:
    table = pq.read_table(lake.table(asset, doc_id))
    column = table.column("vector").combine_chunks()
    dim = column.type.list_size
    matrix = (
        column.values.to_numpy(zero_copy_only=False).reshape(-1, dim) if len(column) else np.zeros((0, dim), np.float32)
    )
    return table.column("node_id").to_pylist(), table.column("kind").to_pylist(), matrix


def write_vectors(
    lake: Lake,
    asset: str,
    doc_id: str,
    ids: Sequence[str],
    kinds: Sequence[str],
    matrix: np.ndarray,
    version: str,
    extra: Mapping[str, str] | None = None,
) -> None:
    metadata = {**(extra or {}), VERSION_KEY: version}
    write_parquet_atomic(vectors_table(ids, kinds, matrix), lake.table(asset, doc_id), metadata)


def pin_vectors(
    ids: Sequence[str], matrix: np.ndarray, pinned: Mapping[str, np.ndarray]
) -> tuple[list[str], np.ndarray]:
    """The leaf vectors with `pinned` ones replacing (or added after) theirs."""
    if not pinned:
        return list(ids), matrix
    position = {node_id: k for k, node_id in enumerate(ids)}
    out = np.array(matrix, dtype=np.float32, copy=True)
    for node_id, vector in pinned.items():
        if node_id in position:
            out[position[node_id]] = vector
    added = [node_id for node_id in pinned if node_id not in position]
    if added:
        out = np.vstack([out, np.stack([pinned[i] for i in added])])
    return [*ids, *added], out.astype(np.float32, copy=False)


def propagate_vectors(
    nodes: Sequence[Node], leaf_ids: Sequence[str], leaf_matrix: np.ndarray, cfg: IndexConfig
) -> tuple[list[str], list[str], np.ndarray]:
    kind_of = {n.node_id: n.kind for n in nodes}
    sentences = {i: v for i, v in zip(leaf_ids, leaf_matrix, strict=True) if kind_of.get(i) is NodeKind.SENTENCE}
    pinned = {i: v for i, v in zip(leaf_ids, leaf_matrix, strict=True) if kind_of.get(i) is NodeKind.PARAGRAPH}
    vectors = propagate(nodes, sentences, mode=cfg.parent_vector, overrides=pinned)
    ids = [n.node_id for n in nodes if n.node_id in vectors]
    dim = leaf_matrix.shape[1]
    matrix = np.stack([vectors[i] for i in ids]) if ids else np.zeros((0, dim), np.float32)
    return ids, [str(kind_of[i]) for i in ids], matrix


def search_text(node: Node, doc_title: str, section_title: str) -> str:
    """What BM25 sees for a paragraph: its text plus where it lives, so questions that
    name a paper or a section still match paragraphs that do not repeat those words."""
    return " ".join(t for t in (doc_title, section_title, node.text) if t)


INDEX_ROWS_EXTRA = pa.schema([pa.field("search_text", pa.string())])


def index_rows_table(nodes: Sequence[Node], vector_ids: Sequence[str], matrix: np.ndarray, doc_title: str) -> pa.Table:
    """The per-document rows both indexes are assembled from: every node, its vector
    (null where it has none) and, for paragraphs, the BM25 text."""
    base = nodes_to_table(nodes)
    dim = matrix.shape[1]
    position = {i: k for k, i in enumerate(vector_ids)}
    titles = {n.node_id: n.title for n in nodes if n.kind is NodeKind.SECTION}
    vectors = [matrix[position[n.node_id]].tolist() if n.node_id in position else None for n in nodes]
    texts = [  # a page rendering or a figure without caption has no text: BM25 never sees it
        search_text(n, doc_title, titles.get(n.parent_id or "", ""))
        if n.kind is NodeKind.PARAGRAPH and n.attachment is not Attachment.PAGE and n.text.strip()
        else None
        for n in nodes
    ]
    base = base.append_column(
        pa.field("vector", pa.list_(pa.float32(), dim)), pa.array(vectors, pa.list_(pa.float32(), dim))
    )
    return base.append_column(INDEX_ROWS_EXTRA.field("search_text"), pa.array(texts, pa.string()))


# ── one call per per-document step (the assets and `index_corpus` share them) ──


# Marks the version of a document whose figure images could not all be embedded: as with
# captions, it stays out of date and the next run asks again (for those figures only: the
# others' image vectors are cached).
IMAGES_INCOMPLETE = "+images-incomplete"
IMAGE_ERRORS_KEY = "image_errors"  # node_id -> reason, JSON, in the leaf table's metadata


def embed_document(lake: Lake, doc_id: str, cfg: IndexConfig, embedder: Embedder) -> tuple[list[str], np.ndarray, str]:
    """Embed the document's leaves (and, with an embedder that embeds images, its figures'
    images) and store them; returns (ids, matrix, version). A document with a figure left
    uncaptioned, or whose image failed to embed, is never "up to date": the next run retries."""
    nodes = indexed_tree(lake, doc_id, cfg)
    ids, matrix = embed_leaves(nodes, embedder, cfg)
    figures = figure_vectors(
        nodes, embedder, lambda digest: lake.blob(digest).read_bytes(), cfg.figure_vectors, dict(zip(ids, matrix))
    )
    ids, matrix = pin_vectors(ids, matrix, figures.vectors)
    kind_of = {n.node_id: str(n.kind) for n in nodes}
    version = embeddings_version(read_source(lake, doc_id)["content_hash"], cfg, repaired_of(lake, doc_id, cfg))
    if caption_errors(lake, doc_id):
        version += INCOMPLETE
    extra = {}
    if figures.errors:
        version += IMAGES_INCOMPLETE
        extra[IMAGE_ERRORS_KEY] = json.dumps(figures.errors, sort_keys=True)
    write_vectors(lake, LEAF_EMBEDDINGS, doc_id, ids, [kind_of[i] for i in ids], matrix, version, extra)
    return ids, matrix, version


def image_errors(lake: Lake, doc_id: str) -> dict[str, str]:
    """node_id -> why the figure's image vector is missing (it kept its caption vector)."""
    raw = parquet_metadata(lake.table(LEAF_EMBEDDINGS, doc_id)).get(IMAGE_ERRORS_KEY)
    return dict(json.loads(raw)) if raw else {}


def propagate_document(lake: Lake, doc_id: str, cfg: IndexConfig) -> tuple[list[str], np.ndarray, str]:
    """Every node's vector from the stored leaves; returns (kinds, matrix, version)."""
    nodes = indexed_tree(lake, doc_id, cfg)
    leaf_ids, _, leaf_matrix = read_vectors(lake, LEAF_EMBEDDINGS, doc_id)
    ids, kinds, matrix = propagate_vectors(nodes, leaf_ids, leaf_matrix, cfg)
    version = stored_version(lake, LEAF_EMBEDDINGS, doc_id) or ""
    write_vectors(lake, NODE_EMBEDDINGS, doc_id, ids, kinds, matrix, version)
    return kinds, matrix, version


def write_index_rows(lake: Lake, doc_id: str, cfg: IndexConfig) -> tuple[pa.Table, str]:
    """Nodes, vectors and BM25 text of the document, what the indexes are assembled from."""
    nodes = indexed_tree(lake, doc_id, cfg)
    ids, _, matrix = read_vectors(lake, NODE_EMBEDDINGS, doc_id)
    table = index_rows_table(nodes, ids, matrix, read_source(lake, doc_id)["title"])
    version = stored_version(lake, NODE_EMBEDDINGS, doc_id) or ""
    write_parquet_atomic(table, lake.table(INDEX_ROWS, doc_id), {VERSION_KEY: version})
    return table, version
