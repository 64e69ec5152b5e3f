"""`make cluster-demo` indexes a corpus every install has."""

from __future__ import annotations

from pathlib import Path

from kohaku_assets.cluster.demo import demo_corpus
from kohaku_rag.samples import SAMPLES


def test_cluster_demo_corpus_needs_no_folder_beside_the_clone(tmp_path: Path) -> None:
    # The demo's default corpus is the bundled samples, never a folder beside the clone
    # (which a user's clone lacks).
    corpus = demo_corpus(None, tmp_path / "corpus")
    assert sorted(p.stem for p in corpus.glob("*.pdf")) == sorted(s.doc_id for s in SAMPLES)
    assert (corpus / "metadata.csv").is_file()
