"""The search aids: the expansion dictionary read from the documents, the user file, the
document metadata, and their assembly as an index of the lake (incremental, lag-tracked)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from kohaku_rag.indexing import assembly
from kohaku_rag.indexing.doc_metadata import DocMetadata, authors_of, matching_documents
from kohaku_rag.indexing.expansions import (
    Expansions,
    define_pairs,
    match_long_form,
    merge_definitions,
    read_user_file,
)
from kohaku_rag.indexing.index_config import IndexConfig
from kohaku_rag.indexing.pipeline import index_corpus
from kohaku_rag.indexing.search_aids import assemble_search_aids, load_search_aids, search_aids_behind
from kohaku_rag.lake.layout import Lake


def test_definitions_in_both_directions() -> None:
    text = (
        "We report the power usage effectiveness (PUE) and use graphics processing units (GPUs). "
        "The WUE (water usage effectiveness) was low. Training ran for 12 hours (BERT) on the cloud."
    )
    assert define_pairs(text) == [
        ("PUE", "power usage effectiveness"),
        ("GPU", "graphics processing units"),
        ("WUE", "water usage effectiveness"),
    ]


def test_long_form_must_spell_the_abbreviation() -> None:
    assert match_long_form("CFE", "the share of carbon-free energy") == "carbon-free energy"
    assert match_long_form("PUE", "we measured the total energy") is None
    assert match_long_form("ML", "modern machine learning") == "machine learning"


def test_merge_keeps_the_most_frequent_forms_and_the_user_file_wins() -> None:
    counts = Counter(
        {("PUE", "power usage effectiveness"): 5, ("PUE", "power usage efficiency"): 1, ("FOO", "f o o"): 1}
    )
    merged = merge_definitions(counts, {"FOO": "foo bar|foobar"})
    assert merged["PUE"] == ("power usage effectiveness", "power usage efficiency")
    assert merged["FOO"] == ("foo bar", "foobar")
    assert merged["kWh"] == ("kilowatt hours",)  # the built-in units
    assert "kWh" not in merge_definitions(counts, builtin=False)


def test_expand_query_both_ways() -> None:
    e = Expansions({"PUE": ("power usage effectiveness",), "GPU": ("graphics processing unit",)})
    assert e.expand_query("What was the PUE?") == "What was the PUE? power usage effectiveness"
    assert e.expand_query("How many GPUs?") == "How many GPUs? graphics processing unit"
    assert e.expand_query("The Power-Usage effectiveness of X") == "The Power-Usage effectiveness of X PUE"
    assert e.expand_query("pue in lower case is not the abbreviation") == "pue in lower case is not the abbreviation"


def test_user_file_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "expansions.csv"
    bad.write_text("term,expansion\nPUE,power usage effectiveness\nWUE,\n")
    with pytest.raises(ValueError, match=r"expansions.csv, line 3: expected term,expansion"):
        read_user_file(bad)
    bad.write_text("abbr,long\nPUE,x\n")
    with pytest.raises(ValueError, match="header row with the columns term,expansion"):
        read_user_file(bad)


def test_authors_and_matching() -> None:
    assert authors_of("Emma Strubell, Ananya Ganesh, and Andrew McCallum. (2019). Energy and Policy.") == (
        "Strubell",
        "Ganesh",
        "McCallum",
    )
    assert authors_of("Jae-Won Chung, Jeff J. Ma, Mosharaf Chowdhury (2025). The ML.ENERGY Benchmark.") == (
        "Chung",
        "Ma",
        "Chowdhury",
    )
    assert authors_of("Amazon Staff. (2023). Amazon Sustainability Report.") == ("Amazon",)
    docs = [DocMetadata("s", "Energy and Policy Considerations", "2019", ("Strubell",)), DocMetadata("t", "", "2023")]
    assert matching_documents("What did Strubell's 2023 study find?", docs, ("author", "year")) == {"s", "t"}
    assert matching_documents("What did strubell find?", docs, ("author", "year")) == set()  # case-sensitive
    assert matching_documents("In 2023?", docs, ("author",)) == set()
    assert matching_documents("Per energy and policy considerations, ...", docs, ("title",)) == {"s"}


def _corpus(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "a.md").write_text("# A\n\n## S\n\nThe power usage effectiveness (PUE) was 1.1.\n")
    (folder / "b.md").write_text("# B\n\n## S\n\nWe trained on tensor processing units (TPUs).\n")
    (folder / "metadata.csv").write_text('id,title,year,citation\na,Paper A,2021,"Ann Lee, Bo Kim. (2021). Paper A."\n')
    return folder


def test_assembled_incrementally_and_tracked_by_lag(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    lake = Lake(tmp_path / "lake")
    index_corpus(corpus, lake, IndexConfig(captioner="none"))
    aids = load_search_aids(lake)
    assert aids is not None
    assert aids.expansions.forms["PUE"] == ("power usage effectiveness",)
    assert aids.expansions.forms["TPU"][0].startswith("tensor processing unit")
    assert {d.doc_id: (d.year, d.authors) for d in aids.documents} == {"a": ("2021", ("Lee", "Kim")), "b": ("", ())}
    assert not assembly.indexes_behind(lake, ["a", "b"], corpus).behind

    # The user file changes only the aids; one changed document is the only one read again.
    (corpus / "expansions.csv").write_text("term,expansion\nXPU,accelerator\n")
    assert assembly.indexes_behind(lake, ["a", "b"], corpus) == assembly.IndexLag(
        [], [], ["metadata.csv/expansions.csv"]
    )
    (corpus / "b.md").write_text("# B\n\n## S\n\nWe trained on the carbon-free energy (CFE) grid.\n")
    summary = index_corpus(corpus, lake)
    assert summary.recomputed == ["b"]
    aids = load_search_aids(lake)
    assert aids is not None and aids.expansions.forms["XPU"] == ("accelerator",)
    assert aids.expansions.forms["CFE"] == ("carbon free energy",) and "TPU" in aids.expansions.forms  # built-in
    assert search_aids_behind(lake, ["a", "b"], corpus) == []
    assert assemble_search_aids(lake, ["a", "b"], corpus).extracted == []  # both from the cache now


def test_a_bad_user_file_fails_assembly_and_keeps_the_old_aids(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    lake = Lake(tmp_path / "lake")
    index_corpus(corpus, lake, IndexConfig(captioner="none"))
    before = load_search_aids(lake)
    (corpus / "expansions.csv").write_text("term,expansion\nXPU\n")
    with pytest.raises(ValueError, match="line 2"):
        assemble_search_aids(lake, ["a", "b"], corpus)
    assert load_search_aids(lake) == before
    assert search_aids_behind(lake, ["a", "b"], corpus) == ["metadata.csv/expansions.csv"]


def test_stored_retrievals_follow_the_aids_only_when_a_config_uses_them(tmp_path: Path) -> None:
    from kohaku_rag.answering.qa_config import QAConfig, RetrievalPart
    from kohaku_rag.answering.qa_tables import keys_for
    from kohaku_rag.retrieval.retrieval_config import RetrievalConfig

    corpus = _corpus(tmp_path / "corpus")
    lake = Lake(tmp_path / "lake")
    index_corpus(corpus, lake, IndexConfig(captioner="none"))
    questions = tmp_path / "q.csv"
    questions.write_text("id,question,answer_unit\nq1,What was the PUE?,PUE\n")
    plain = QAConfig(questions=str(questions))
    expanding = QAConfig(
        questions=str(questions), retrieval=RetrievalPart(search=RetrievalConfig(query_expansion="bm25"))
    )
    before = keys_for(lake, plain).retrieval, keys_for(lake, expanding).retrieval
    (corpus / "expansions.csv").write_text("term,expansion\nPUE,power usage effectiveness ratio\n")
    index_corpus(corpus, lake)
    after = keys_for(lake, plain).retrieval, keys_for(lake, expanding).retrieval
    assert after[0] == before[0] and after[1] != before[1]
