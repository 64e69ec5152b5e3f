"""Fixtures of the answering tests: a lake indexed once per module from the shared corpus,
and per test a copy of it with a question file and the fake QA model server."""

import shutil

import pytest
from corpus_docs import indexed_corpus
from qa_server import QUESTIONS, QAServer

from kohaku_assets.resources import KohakuSettings


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return indexed_corpus(tmp_path_factory.mktemp("answering"))


@pytest.fixture()
def env(built, tmp_path, monkeypatch):
    lake = tmp_path / "lake"
    shutil.copytree(built / "lake", lake)
    monkeypatch.setenv("DAGSTER_HOME", str(lake / ".dagster"))
    monkeypatch.setenv("KOHAKU_LAKE", str(lake))
    monkeypatch.delenv("KOHAKU_CONFIGS", raising=False)
    questions = tmp_path / "questions.csv"
    lines = ["id,question,answer,answer_value,answer_unit,ref_id"]
    for i, (q, (unit, value, doc)) in enumerate(QUESTIONS.items(), start=1):
        lines.append(f"q{i},{q},{value} {unit},{value},{unit},['{doc}']")
    questions.write_text("\n".join(lines) + "\n")
    settings = KohakuSettings(lake_root=str(lake), corpus_dir=str(built / "corpus"))
    with QAServer() as server:
        yield settings, server, questions
