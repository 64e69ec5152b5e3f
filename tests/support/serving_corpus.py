"""The serving tests' corpus: the small markdown corpus with `water` as a real PDF (so
pages and highlights exist) and a metadata.csv giving it a title and URL; also used by
bench/serving/serve_smoke.py and bench/serving/serve_load.py."""

from __future__ import annotations

import json
from pathlib import Path

from kohaku_rag.samples.render import render_pdf
from tests.support.corpus_docs import DOCS

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


def write_config(lake: Path, name: str, base_url: str, max_concurrent: int = 4) -> None:
    """A config `name` answering through the OpenAI-compatible server at `base_url`."""
    llm = {"backend": "openai", "model": "scripted", "base_url": base_url, "api_key_env": None,
           "max_retries": 0, "max_concurrent": max_concurrent}  # fmt: skip
    (lake / "configs").mkdir(exist_ok=True)
    (lake / "configs" / f"{name}.json").write_text(json.dumps({"questions": "unused.csv", "generation": {"llm": llm}}))


def write_bundled_config(lake: Path, name: str = "bundled") -> None:
    """A config `name` answering with the bundled model on an 800-character context, no
    planner, no retry: one answer in tens of seconds on 2 cores."""
    from kohaku_rag.llm.model_files import bundled_model

    llm = {"backend": "llama", "model": str(bundled_model()), "n_ctx": 2048}
    config = {
        "questions": "unused.csv",
        "retrieval": {"use_planner": False, "budget_chars": 800},
        "generation": {"llm": llm, "max_retries": 0},
    }
    (lake / "configs").mkdir(exist_ok=True)
    (lake / "configs" / f"{name}.json").write_text(json.dumps(config))
