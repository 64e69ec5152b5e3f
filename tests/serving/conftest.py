"""A lake of the serving corpus (tests/support/serving_corpus.py), a
config `fake` answering through the fake QA model server, and the app over a copy of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import kohaku_rag as kr
from kohaku_rag.serving.app import build_app
from kohaku_rag.serving.settings import ServeSettings
from tests.support.qa_server import QAServer
from tests.support.serving_corpus import write_config, write_serving_corpus


@pytest.fixture(scope="package")
def built_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serving")
    summary = kr.index(write_serving_corpus(root / "corpus"), root / "lake", progress=lambda _m: None)
    assert not summary.failed, summary.failed
    return root / "lake"


@pytest.fixture()
def qa() -> QAServer:
    with QAServer() as server:
        yield server


@pytest.fixture()
def lake(built_lake: Path, tmp_path: Path, qa: QAServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A per-test copy of the lake with a `fake` config answering through `qa`."""
    lake = Path(shutil.copytree(built_lake, tmp_path / "lake"))
    monkeypatch.delenv("KOHAKU_CONFIGS", raising=False)
    write_config(lake, "fake", qa.base_url)
    return lake


@pytest.fixture()
def settings(lake: Path) -> ServeSettings:
    return ServeSettings(lake=lake, config="fake")


@pytest.fixture()
def app(settings: ServeSettings):
    return build_app(settings)
