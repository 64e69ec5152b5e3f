"""A lake of the small corpus with `water` as a real PDF (so pages and highlights exist), a
config `fake` answering through the fake QA model server, and the app over a copy of it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from corpus_docs import DOCS
from qa_server import QAServer

import kohaku_rag as kr
from kohaku_rag.samples.render import render_pdf
from kohaku_rag.serving.app import build_app
from kohaku_rag.serving.settings import ServeSettings

WATER_MD = (
    "# Water\n\n## 1 Cooling\n\nData centers withdraw water for evaporative cooling towers.\n\n"
    "The facility was audited by an external firm over several months of operation in the year. "
    "The water usage effectiveness was 0.18 liters per kWh for the facility in 2023. "
    "Most of the water evaporated in the cooling towers during the summer months of the study.\n"
)
WATER_URL = "https://example.org/water-report.pdf"
WATER_QUESTION = "What was the water usage effectiveness in liters per kWh?"


def write_serving_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for doc_id, text in DOCS.items():
        if doc_id != "water":
            (folder / f"{doc_id}.md").write_text(text)
    pdf = render_pdf(WATER_MD, columns=1, running_header="Water report", metadata={"title": "Water"})
    (folder / "water.pdf").write_bytes(pdf)
    (folder / "metadata.csv").write_text(f"id,title,url\nwater,Water report,{WATER_URL}\n")
    return folder


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


def write_config(lake: Path, name: str, base_url: str, max_concurrent: int = 4) -> None:
    llm = {"backend": "openai", "model": "scripted", "base_url": base_url, "api_key_env": None,
           "max_retries": 0, "max_concurrent": max_concurrent}  # fmt: skip
    (lake / "configs").mkdir(exist_ok=True)
    (lake / "configs" / f"{name}.json").write_text(json.dumps({"questions": "unused.csv", "generation": {"llm": llm}}))


@pytest.fixture()
def settings(lake: Path) -> ServeSettings:
    return ServeSettings(lake=lake, config="fake")


@pytest.fixture()
def app(settings: ServeSettings):
    return build_app(settings)
