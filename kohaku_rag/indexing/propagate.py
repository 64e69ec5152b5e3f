"""Bottom-up vectors: each parent is the length-weighted mean of its children.

Only sentences are embedded; paragraphs, sections and the document get their vectors
from their children, so one embedding pass serves every level of the tree. The mean is
L2-normalised afterwards because the index searches by cosine similarity.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np

from kohaku_rag.document.tree import Node, NodeKind

ParentMode = Literal["weighted", "mean"]
_DEPTH = {NodeKind.SENTENCE: 3, NodeKind.PARAGRAPH: 2, NodeKind.SECTION: 1, NodeKind.DOCUMENT: 0}


def combine(vectors: Sequence[np.ndarray], lengths: Sequence[int], mode: ParentMode = "weighted") -> np.ndarray:
    """Normalised (length-)weighted mean of child vectors."""
    stack = np.stack(vectors).astype(np.float64)
    weights = np.asarray(lengths if mode == "weighted" else [1] * len(vectors), dtype=np.float64)
    if weights.sum() <= 0:
        weights = np.ones(len(vectors))
    mean = (weights[:, None] * stack).sum(axis=0) / weights.sum()
    norm = np.linalg.norm(mean)
    return (mean / norm if norm > 0 else mean).astype(np.float32)


def propagate(
    nodes: Sequence[Node],
    leaf_vectors: Mapping[str, np.ndarray],
    *,
    mode: ParentMode = "weighted",
    overrides: Mapping[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    """Vectors for every node that has a vectorised descendant.

    `overrides` pins a node's vector (e.g. a paragraph embedded from its full text); its
    ancestors then build on the pinned vector instead of on its children.
    """
    vectors: dict[str, np.ndarray] = {k: np.asarray(v, dtype=np.float32) for k, v in leaf_vectors.items()}
    vectors.update({k: np.asarray(v, dtype=np.float32) for k, v in (overrides or {}).items()})
    pinned = set(vectors)
    children: dict[str, list[Node]] = defaultdict(list)
    for node in nodes:
        if node.parent_id is not None:
            children[node.parent_id].append(node)
    for node in sorted(nodes, key=lambda n: -_DEPTH[n.kind]):
        if node.node_id in pinned:
            continue
        kids = [c for c in children.get(node.node_id, []) if c.node_id in vectors]
        if kids:
            vectors[node.node_id] = combine([vectors[c.node_id] for c in kids], [max(c.length, 1) for c in kids], mode)
    return vectors
