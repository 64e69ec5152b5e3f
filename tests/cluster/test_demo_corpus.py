"""`make cluster-demo` indexes a corpus every install has (issue 43)."""

from __future__ import annotations

from pathlib import Path

from kohaku_assets.cluster.demo import demo_corpus
from kohaku_rag.samples import SAMPLES


def test_cluster_demo_corpus_needs_no_folder_beside_the_clone(tmp_path: Path) -> None:
    # Failed on main: the demo read <clone>/../shared/wattbot/corpus_json by default and
    # stopped with "no WattBot JSON documents found" on a user's clone.
    corpus = demo_corpus(None, tmp_path / "corpus")
    assert sorted(p.stem for p in corpus.glob("*.pdf")) == sorted(s.doc_id for s in SAMPLES)
    assert (corpus / "metadata.csv").is_file()
