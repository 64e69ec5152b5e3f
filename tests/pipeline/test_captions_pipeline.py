"""Figures flow through the captions asset into the index; changing the captioner
recomputes captions and what depends on them, never the parse; captions are cached."""

import json
import shutil

import pyarrow.parquet as pq
import pytest
from dagster import AssetKey

from kohaku_assets.instance import instance_for
from kohaku_assets.resources import KohakuSettings
from kohaku_assets.runner import embedder_for, run_index
from kohaku_rag.retrieval.retriever import open_vector_store
from kohaku_rag.samples import write_sample_corpus

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
    with open_vector_store(ocr.lake, embedder_for(ocr)) as store:
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


def test_vision_captioner_in_the_pipeline_retries_failed_figures(sample_pdf, tmp_path, monkeypatch):
    """captioner = "vision" through the index: a figure the endpoint refused keeps its PDF
    caption, the document stays out of date, and the next run captions it."""
    from tests.support.vision_server import Reply, VisionServer

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "lake" / ".dagster"))
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(sample_pdf, corpus / sample_pdf.name)
    with VisionServer() as server:
        cfg = tmp_path / "vision.json"
        cfg.write_text(
            json.dumps(
                {
                    "captioner": "vision",
                    "vision_base_url": server.base_url,
                    "vision_model": "test-vl",
                    "vision_api_key_env": None,
                    "vision_max_retries": 0,
                }
            )
        )
        settings = KohakuSettings(lake_root=str(tmp_path / "lake"), corpus_dir=str(corpus), index_config_file=str(cfg))
        server.script(Reply(status=400))
        first = run_index(settings, progress=lambda _m: None)
        assert first.recomputed == [DOC]
        (row,) = pq.read_table(settings.lake.table("captions", DOC)).to_pylist()
        assert row["error"] and row["caption"] == row["pdf_caption"]

        second = run_index(settings, progress=lambda _m: None)
        assert second.recomputed == [DOC]  # retried, not skipped
        (row,) = pq.read_table(settings.lake.table("captions", DOC)).to_pylist()
        assert row["error"] is None and "A chart of" in row["caption"] and row["caption"].startswith(row["pdf_caption"])
        assert _latest_meta(settings, "document_tree")["reused"].value is True
        assert run_index(settings, progress=lambda _m: None).skipped == [DOC]  # complete now
        assert len(server.requests) == 2
