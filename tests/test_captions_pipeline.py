"""Figures flow through the captions asset into the index; changing the captioner
recomputes captions and what depends on them, never the parse; captions are cached."""

import json
import shutil

import pyarrow.parquet as pq
import pytest
from dagster import AssetKey

from kohaku_assets.runner import instance_for, run_index
from kohaku_assets.settings import KohakuSettings
from kohaku_rag.samples import write_sample_corpus
from kohaku_rag.search import open_vector_store

DOC = "sample_gpu_energy"


@pytest.fixture(scope="module")
def sample_pdf(tmp_path_factory):
    folder = tmp_path_factory.mktemp("samples")
    write_sample_corpus(folder)
    return folder / f"{DOC}.pdf"


def _latest_meta(settings, asset):
    event = instance_for(settings.lake.root).get_latest_materialization_event(AssetKey(asset))
    return event.asset_materialization.metadata


def test_captioner_change_reuses_the_tree_and_cache_hits(sample_pdf, tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "lake" / ".dagster"))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(sample_pdf, corpus / sample_pdf.name)
    ocr_cfg, none_cfg = tmp_path / "ocr.json", tmp_path / "none.json"
    ocr_cfg.write_text(json.dumps({"captioner": "ocr"}))
    none_cfg.write_text(json.dumps({"captioner": "none"}))

    def settings(cfg):
        return KohakuSettings(lake_root=str(tmp_path / "lake"), corpus_dir=str(corpus), index_config_file=str(cfg))

    ocr = settings(ocr_cfg)
    assert run_index(ocr, progress=lambda _m: None).recomputed == [DOC]
    rows = pq.read_table(ocr.lake.table("captions", DOC)).to_pylist()
    assert len(rows) == 1 and rows[0]["error"] is None
    caption = rows[0]["caption"]
    assert caption.startswith("Figure 1: GPU board energy") and "Text in figure:" in caption
    assert any(ch.isdigit() for ch in caption.split("Text in figure:")[1])  # bar values were read
    with open_vector_store(ocr.lake, ocr.embedder()) as store:
        node = store.get_nodes([rows[0]["node_id"]])[rows[0]["node_id"]]
    assert str(node.attachment) == "image" and "Text in figure:" in node.text
    assert _latest_meta(ocr, "captions")["cache_hits"].value == 0

    plain = settings(none_cfg)
    report = run_index(plain, progress=lambda _m: None)
    assert report.recomputed == [DOC]
    assert _latest_meta(plain, "document_tree")["reused"].value is True  # no re-parse
    rows = pq.read_table(plain.lake.table("captions", DOC)).to_pylist()
    assert rows[0]["caption"] == rows[0]["pdf_caption"] and rows[0]["captioner"] == "none"

    again = settings(ocr_cfg)
    run_index(again, progress=lambda _m: None)
    assert _latest_meta(again, "captions")["cache_hits"].value == 1  # OCR not run again
    assert _latest_meta(again, "document_tree")["reused"].value is True
