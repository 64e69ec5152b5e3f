"""The Python API: index a corpus without Dagster, open the lake, search it, ask it."""

from __future__ import annotations

from pathlib import Path

import pytest

import kohaku_rag as kr
from kohaku_rag.answering.prediction import Prediction
from kohaku_rag.answering.qa_config_file import qa_config_from_mapping
from kohaku_rag.indexing.index_config import IndexConfig
from kohaku_rag.indexing.pipeline import IndexSummary
from kohaku_rag.retrieval.context import ContextItem
from tests.support.corpus_docs import write_corpus
from tests.support.qa_server import QAServer


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small markdown corpus indexed once for the module's read-only tests."""
    root = tmp_path_factory.mktemp("api")
    summary = kr.index(write_corpus(root / "corpus"), root / "lake", progress=lambda _m: None)
    assert sorted(summary.recomputed) == ["carbon", "gpu", "water"] and not summary.failed
    return root / "lake"


def test_index_builds_then_skips_what_is_up_to_date(corpus: Path, tmp_path: Path) -> None:
    said: list[str] = []
    first = kr.index(corpus, tmp_path / "lake", progress=said.append)
    assert isinstance(first, IndexSummary)
    assert first.documents == 3 and sorted(first.recomputed) == ["carbon", "gpu", "water"] and not first.failed
    assert said  # progress is reported
    again = kr.index(corpus, tmp_path / "lake", progress=lambda _m: None)
    assert again.recomputed == [] and sorted(again.skipped) == ["carbon", "gpu", "water"]
    assert (tmp_path / "lake" / "index_config.json").exists()


def test_search_returns_budgeted_context(lake: Path) -> None:
    rag = kr.open(lake)
    assert rag.index_config == IndexConfig()  # what the lake records
    items = rag.search("How much water per kWh?", budget_chars=400)
    assert items and all(isinstance(i, ContextItem) for i in items)
    assert items[0].doc_id == "water"
    assert sum(len(i.text) for i in items) <= 400
    assert len(rag.search("How much water per kWh?", k=1)) == 1


def test_open_without_an_index_says_how_to_build_one(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"kohaku_rag\.index"):
        kr.open(tmp_path / "missing")


def test_ask_answers_from_the_right_document(lake: Path, qa_server: QAServer) -> None:
    llm = {"backend": "openai", "model": "scripted", "base_url": qa_server.base_url, "api_key_env": None}
    cfg = qa_config_from_mapping({"questions": "unused.csv", "generation": {"llm": llm}})
    result = kr.open(lake).ask("What was the water usage effectiveness in liters per kWh?", config=cfg, unit="L/kWh")
    assert isinstance(result, kr.AskResult) and isinstance(result.prediction, Prediction)
    assert result.value == "0.18" and result.unit == "L/kWh" and not result.is_blank
    assert result.refs == ("water",) and result.answer == "0.18 L/kWh"
    assert result.cited and all(c.doc_id == "water" for c in result.cited)
    assert all("0.18" in c.text for c in result.cited)
    assert qa_server.kinds()["answer"] == 1  # one run, one answer request


def test_ask_votes_the_configs_runs(lake: Path, qa_server: QAServer) -> None:
    """`runs = 3` in the config: ask asks three runs (seeds 0, 1, 2) and answers with their
    vote, the costs of all three added up (it asked one run, whatever the config said)."""
    llm = {"backend": "openai", "model": "scripted", "base_url": qa_server.base_url, "api_key_env": None}
    cfg = qa_config_from_mapping({"questions": "unused.csv", "generation": {"llm": llm}, "voting": {"runs": 3}})
    before = qa_server.kinds()["answer"]
    result = kr.open(lake).ask("What was the water usage effectiveness in liters per kWh?", config=cfg, unit="L/kWh")
    assert qa_server.kinds()["answer"] - before == 3
    assert result.value == "0.18" and result.refs == ("water",)
    assert result.prediction.llm_calls == 3 and result.cited
    seeds = sorted(r.body.get("seed") for r in qa_server.requests[-3:])
    assert seeds == [0, 1, 2]
