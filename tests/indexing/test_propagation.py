"""Parent vectors are exactly the normalised length-weighted mean of their children."""

import numpy as np
import pytest

from kohaku_rag.document.tree import NodeKind, ParsedDocument, ParsedParagraph, ParsedSection, build_tree
from kohaku_rag.indexing.propagate import combine, propagate
from kohaku_rag.parse.sentences import split_sentences


def _tree():
    doc = ParsedDocument(
        "d",
        "Doc",
        [
            ParsedSection(
                "One", [ParsedParagraph("Short one. A much longer second sentence here."), ParsedParagraph("Alone.")]
            ),
            ParsedSection("Two", [ParsedParagraph("Third paragraph has text.")]),
        ],
    )
    return build_tree(doc, split_sentences)


def _unit(v):
    return v / np.linalg.norm(v)


def test_weighted_mean_by_hand():
    nodes = _tree()
    rng = np.random.default_rng(0)
    leaves = {n.node_id: _unit(rng.normal(size=8)).astype(np.float32) for n in nodes if n.kind is NodeKind.SENTENCE}
    vectors = propagate(nodes, leaves)
    by_id = {n.node_id: n for n in nodes}
    s1, s2 = "d:sec1:p1:s1", "d:sec1:p1:s2"
    l1, l2 = len(by_id[s1].text), len(by_id[s2].text)
    expected_p1 = _unit((l1 * leaves[s1].astype(np.float64) + l2 * leaves[s2]) / (l1 + l2))
    np.testing.assert_allclose(vectors["d:sec1:p1"], expected_p1, atol=1e-6)
    # a section weights its paragraphs by their (paragraph) lengths, using their propagated vectors
    p1, p2 = by_id["d:sec1:p1"], by_id["d:sec1:p2"]
    expected_sec = _unit(
        (p1.length * vectors["d:sec1:p1"].astype(np.float64) + p2.length * vectors["d:sec1:p2"])
        / (p1.length + p2.length)
    )
    np.testing.assert_allclose(vectors["d:sec1"], expected_sec, atol=1e-6)
    assert set(vectors) == {n.node_id for n in nodes}


def test_plain_mean_and_overrides():
    nodes = _tree()
    leaves = {
        n.node_id: np.eye(4, dtype=np.float32)[i % 4]
        for i, n in enumerate(x for x in nodes if x.kind is NodeKind.SENTENCE)
    }
    vectors = propagate(nodes, leaves, mode="mean")
    np.testing.assert_allclose(vectors["d:sec1:p1"], _unit(leaves["d:sec1:p1:s1"] + leaves["d:sec1:p1:s2"]), atol=1e-6)
    pinned = np.array([0, 0, 0, 1], dtype=np.float32)
    vectors = propagate(nodes, leaves, overrides={"d:sec2:p1": pinned})
    np.testing.assert_allclose(vectors["d:sec2:p1"], pinned)
    np.testing.assert_allclose(vectors["d:sec2"], pinned, atol=1e-6)  # only child: parent equals it


def test_combine_rejects_nothing_and_handles_zero_lengths():
    out = combine([np.array([1.0, 0.0]), np.array([0.0, 1.0])], [0, 0])
    np.testing.assert_allclose(out, _unit(np.array([1.0, 1.0])), atol=1e-6)
    with pytest.raises(ValueError):
        combine([], [])
