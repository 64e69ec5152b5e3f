"""The small markdown corpus the pipeline, QA and API tests index: three documents, one fact each."""

from __future__ import annotations

from pathlib import Path

import pytest

from kohaku_assets.resources import KohakuSettings
from kohaku_assets.runner import run_index

DOCS = {
    "gpu": "# GPU power\n\n## 1 Measurements\n\nThe A100 GPU drew 400 W on average while training the model for 12 hours.\n\n"
    "Energy use was 4.8 kWh per run, measured with nvidia-smi at one sample per second.\n",
    "water": "# Water\n\n## 1 Cooling\n\nData centers withdraw water for evaporative cooling towers.\n\n"
    "The water usage effectiveness was 0.18 liters per kWh for the facility in 2023.\n",
    "carbon": "# Carbon\n\n## 1 Grid\n\nCarbon intensity of the grid was 429 gCO2e per kWh in the studied region.\n\n"
    "Training emitted 4.3 tCO2e in total according to the authors' estimate.\n",
}


def write_corpus(folder: Path) -> Path:
    """Write DOCS as `<id>.md` files into `folder` (created if needed); returns `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for doc_id, text in DOCS.items():
        (folder / f"{doc_id}.md").write_text(text)
    return folder


def indexed_corpus(root: Path) -> Path:
    """`root/corpus` written and indexed into `root/lake` (its own Dagster home), for
    module-scoped fixtures that copy the lake per test; returns `root`."""
    corpus = write_corpus(root / "corpus")
    mp = pytest.MonkeyPatch()
    mp.setenv("DAGSTER_HOME", str(root / "lake" / ".dagster"))
    try:
        report = run_index(
            KohakuSettings(lake_root=str(root / "lake"), corpus_dir=str(corpus)), progress=lambda _m: None
        )
    finally:
        mp.undo()
    assert not report.failed
    return root
