"""Fixtures shared by every test folder. The helpers themselves live in `tests.support`
(the repository root is on sys.path through pyproject's [tool.pytest.ini_options] pythonpath)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.chat_server import ChatServer
from tests.support.corpus_docs import write_corpus
from tests.support.qa_server import QAServer


@pytest.fixture()
def corpus(tmp_path: Path) -> Path:
    """tmp_path/corpus holding the three markdown documents of corpus_docs.DOCS (gpu, water, carbon)."""
    return write_corpus(tmp_path / "corpus")


@pytest.fixture()
def chat_server() -> Iterator[ChatServer]:
    """A started fake OpenAI-compatible chat server that echoes (scriptable per request)."""
    with ChatServer() as server:
        yield server


@pytest.fixture()
def qa_server() -> Iterator[QAServer]:
    """A started fake chat model answering corpus_docs' questions with their gold values."""
    with QAServer() as server:
        yield server
