"""Rows of the vector store: nodes and vectors checked and converted for writing, and read
back as nodes. Shared by the store and by the checks that read a store file directly."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pyarrow as pa

from kohaku_rag.document.table_record import record_from_json, record_to_json
from kohaku_rag.document.tree import Attachment, Node, NodeKind

Vectors: TypeAlias = Mapping[str, np.ndarray] | tuple[Sequence[str], np.ndarray]
NodesInput: TypeAlias = Sequence[Node] | pa.Table


# The kinds searched with sqlite-vec (the others are few: numpy over plain blobs).
VEC_KINDS: tuple[NodeKind, ...] = (NodeKind.SENTENCE, NodeKind.PARAGRAPH)


@dataclass(frozen=True)
class Hit:
    node_id: str
    doc_id: str
    kind: NodeKind
    score: float  # cosine similarity, higher is closer


@dataclass(frozen=True)
class DocumentUpsert:
    """Everything `apply_changes` needs to (re)write one document."""

    doc_id: str
    version: str
    nodes: NodesInput
    vectors: Vectors
    title: str = ""
    url: str = ""


@dataclass(frozen=True)
class DocumentRow:
    doc_id: str
    version: str
    title: str
    url: str
    n_nodes: int
    updated_at: str


NODE_COLUMNS = (
    "node_id, doc_id, parent_id, kind, ordinal, title, text, page, bbox, attachment, media_hash, length, table_record"
)


def bits_table(kind: NodeKind) -> str:
    return f"bits_{kind.value}"


def vec_table(kind: NodeKind) -> str:
    return f"vec_{kind.value}"


def kind_of(kind: str) -> NodeKind:
    try:
        return NodeKind(kind)
    except ValueError:
        raise ValueError(f"unknown node kind {kind!r}: use one of {[k.value for k in NodeKind]}") from None


def claim(seen: set[str], doc_id: str) -> None:
    if doc_id in seen:
        raise ValueError(f"document {doc_id!r} appears more than once in one change set")
    seen.add(doc_id)


def node_rows(doc_id: str, nodes: NodesInput) -> list[tuple[object, ...]]:
    """Rows for the `nodes` table, checked to belong to `doc_id`."""
    if isinstance(nodes, pa.Table):
        records = [
            (
                r["node_id"],
                r["doc_id"],
                r["parent_id"],
                kind_of(r["kind"]).value,
                r["ordinal"],
                r["title"],
                r["text"],
                r["page"],
                r.get("bbox"),
                r["attachment"],
                r.get("media_hash"),
                json.dumps(r["table"], ensure_ascii=False, separators=(",", ":")) if r.get("table") else None,
            )
            for r in nodes.to_pylist()
        ]
    else:
        records = [
            (
                n.node_id,
                n.doc_id,
                n.parent_id,
                kind_of(n.kind).value,
                n.ordinal,
                n.title,
                n.text,
                n.page,
                n.bbox,
                str(n.attachment),
                n.media_hash,
                record_to_json(n.table) if n.table is not None else None,
            )
            for n in nodes
        ]
    seen: set[str] = set()
    rows: list[tuple[object, ...]] = []
    for rec in records:
        node_id, node_doc, bbox, text = rec[0], rec[1], rec[8], rec[6]
        if node_doc != doc_id:
            raise ValueError(f"document {doc_id!r}: node {node_id!r} belongs to document {node_doc!r}")
        if node_id in seen:
            raise ValueError(f"document {doc_id!r}: node id {node_id!r} appears twice")
        seen.add(node_id)
        bbox_json = json.dumps([float(x) for x in bbox]) if bbox is not None else None
        rows.append(rec[:8] + (bbox_json,) + rec[9:11] + (len(text), rec[11]))
    return rows


def vector_items(doc_id: str, vectors: Vectors, dim: int) -> Iterator[tuple[str, np.ndarray]]:
    """(node_id, float32 unit vector) pairs, checked for shape and finiteness."""
    if isinstance(vectors, tuple):
        ids, matrix = vectors
        matrix = np.asarray(matrix, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(ids):
            raise ValueError(f"document {doc_id!r}: vector matrix has shape {matrix.shape} for {len(ids)} node ids")
        pairs: Iterable[tuple[str, np.ndarray]] = zip(ids, matrix)
    else:
        pairs = vectors.items()
    seen: set[str] = set()
    for node_id, vec in pairs:
        if node_id in seen:
            raise ValueError(f"document {doc_id!r}: two vectors for node {node_id!r}")
        seen.add(node_id)
        v = np.asarray(vec, dtype=np.float32).reshape(-1)
        if v.shape != (dim,):
            raise ValueError(
                f"document {doc_id!r}: vector of node {node_id!r} has {v.size} values, the index "
                f"holds {dim}-dimensional vectors (embedder switched? rebuild the index)"
            )
        norm = float(np.linalg.norm(v))
        if not np.isfinite(norm) or norm == 0.0:
            raise ValueError(f"document {doc_id!r}: vector of node {node_id!r} is zero or not finite")
        yield node_id, v / norm


def row_to_node(r: tuple) -> Node:
    return Node(
        node_id=r[0],
        doc_id=r[1],
        parent_id=r[2],
        kind=NodeKind(r[3]),
        ordinal=r[4],
        title=r[5],
        text=r[6],
        page=r[7],
        bbox=tuple(json.loads(r[8])) if r[8] is not None else None,
        attachment=Attachment(r[9]),
        media_hash=r[10],
        table=record_from_json(r[12], r[7], tuple(json.loads(r[8])) if r[8] is not None else None),
    )
