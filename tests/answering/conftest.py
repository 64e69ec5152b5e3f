"""Fixtures of the answering tests: a lake indexed once per module from the shared corpus,
and per test a copy of it with a question file and the fake QA model server."""

import pytest

from tests.support.corpus_docs import indexed_corpus
from tests.support.qa_server import QAServer, qa_lake


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return indexed_corpus(tmp_path_factory.mktemp("answering"))


@pytest.fixture()
def env(built, tmp_path, monkeypatch):
    settings, questions = qa_lake(built, tmp_path, monkeypatch)
    with QAServer() as server:
        yield settings, server, questions
