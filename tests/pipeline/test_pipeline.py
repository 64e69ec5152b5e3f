"""Incremental indexing through real Dagster materializations on a persistent instance."""

import json
import shutil

import pyarrow.parquet as pq
import pytest

import kohaku_rag as kr
from kohaku_assets.cli import main as cli_main
from kohaku_assets.instance import instance_for
from kohaku_assets.resources import KohakuSettings
from kohaku_assets.runner import embedder_for, resources_for, run_index
from kohaku_rag.lake.layout import Lake
from kohaku_rag.retrieval.retriever import open_vector_store
from kohaku_rag.stores.bm25 import BM25Index
from tests.support.corpus_docs import DOCS


@pytest.fixture()
def env(tmp_path, corpus, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "lake" / ".dagster"))
    (corpus / "metadata.csv").write_text("id,title,url\ngpu,GPU power study,https://example.org/gpu\n")
    settings = KohakuSettings(lake_root=str(tmp_path / "lake"), corpus_dir=str(corpus))
    return settings, corpus


def quiet(_msg):
    pass


def _store_docs(settings):
    with open_vector_store(settings.lake, embedder_for(settings)) as store:
        return store.document_versions()


def test_add_change_delete_and_skip(env):
    settings, corpus = env
    first = run_index(settings, progress=quiet)
    assert sorted(first.recomputed) == ["carbon", "gpu", "water"] and not first.failed
    assert first.nodes["document"] == 3 and first.nodes["sentence"] >= 6
    assert set(_store_docs(settings)) == {"carbon", "gpu", "water"}

    again = run_index(settings, progress=quiet)
    assert again.recomputed == [] and sorted(again.skipped) == ["carbon", "gpu", "water"]

    (corpus / "water.md").write_text(DOCS["water"] + "\nA new paragraph about drought risk in Arizona.\n")
    changed = run_index(settings, progress=quiet)
    assert changed.recomputed == ["water"] and sorted(changed.skipped) == ["carbon", "gpu"]
    with open_vector_store(settings.lake, embedder_for(settings)) as store:
        texts = [n.text for n in store.get_nodes([f"water:sec1:p{i}" for i in range(1, 5)]).values()]
    assert any("drought" in t for t in texts)
    # BM25 is rebuilt from cached tokens; only the changed document was tokenized again,
    # and the result equals a build from scratch.
    from dagster import AssetKey

    event = instance_for(settings.lake.root).get_latest_materialization_event(AssetKey("bm25_index"))
    assert event.asset_materialization.metadata["tokenized_documents"].value == 1
    stored = BM25Index.load(settings.lake.bm25_path)
    for cache in (settings.lake.cache_dir / "bm25_tokens").glob("*.parquet"):
        cache.unlink()
    from kohaku_rag.indexing.assembly import assemble_bm25

    assert sorted(assemble_bm25(settings.lake, ["carbon", "gpu", "water"]).tokenized) == ["carbon", "gpu", "water"]
    fresh = BM25Index.load(settings.lake.bm25_path)
    assert stored.node_ids.tolist() == fresh.node_ids.tolist() and stored.terms.tolist() == fresh.terms.tolist()
    assert (stored.post_scores == fresh.post_scores).all()

    (corpus / "carbon.md").unlink()
    removed = run_index(settings, progress=quiet)
    assert removed.removed == ["carbon"]
    assert set(_store_docs(settings)) == {"gpu", "water"}
    bm25 = BM25Index.load(settings.lake.bm25_path)
    assert not any(n.startswith("carbon:") for n in bm25.node_ids.tolist())
    assert not settings.lake.table("document_tree", "carbon").exists()
    assert not (settings.lake.cache_dir / "bm25_tokens" / "carbon.parquet").exists()
    instance = instance_for(settings.lake.root)
    assert sorted(instance.get_dynamic_partitions("documents")) == ["gpu", "water"]


def test_broken_pdf_fails_alone_and_keeps_the_index(env, tmp_path):
    settings, corpus = env
    run_index(settings, progress=quiet)
    before = _store_docs(settings)
    (corpus / "broken.pdf").write_bytes(b"%PDF-1.7\n this is not really a pdf")
    report = run_index(settings, progress=quiet)
    assert list(report.failed) == ["broken"]
    assert "broken.pdf" in report.failed["broken"]
    assert _store_docs(settings) == before  # nothing already built was touched


def test_metadata_and_tree_tables(env):
    settings, _ = env
    run_index(settings, progress=quiet)
    tree = pq.read_table(settings.lake.table("document_tree", "gpu")).to_pylist()
    assert tree[0]["kind"] == "document" and tree[0]["title"] == "GPU power study"
    ids = {r["node_id"] for r in tree}
    assert all(r["parent_id"] in ids for r in tree if r["parent_id"])
    instance = instance_for(settings.lake.root)
    from dagster import AssetKey

    event = instance.get_latest_materialization_event(AssetKey("document_tree"))
    assert event is not None
    meta = event.asset_materialization.metadata
    assert meta["nodes/sentence"].value >= 2 and "sample" in meta


def test_cli_index_and_search_json(env, capsys):
    settings, corpus = env
    args = ["--lake", settings.lake_root, "--corpus", str(corpus)]
    assert cli_main(["index", *args, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["documents"] == 3 and summary["recomputed"] == 3 and "sentence" in summary["nodes"]
    assert cli_main(["search", "How much water per kWh?", *args, "--json", "--budget-chars", "400"]) == 0
    items = json.loads(capsys.readouterr().out)
    assert items and items[0]["doc_id"] == "water"
    assert sum(len(i["text"]) for i in items) <= 400
    assert set(items[0]) >= {"doc_id", "node_id", "kind", "page", "score", "text"}
    questions = corpus.parent / "q.csv"
    questions.write_text(
        "\ufeffid,question\r\nq1,What tCO2e did training emit?\r\nq2,Which GPU drew 400 W?\r\n", encoding="utf-8"
    )
    assert cli_main(["search", "--questions", str(questions), *args]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [line["id"] for line in lines] == ["q1", "q2"]
    assert lines[0]["context"][0]["doc_id"] == "carbon" and lines[1]["context"][0]["doc_id"] == "gpu"


def test_cli_runs_are_the_code_locations_jobs(env, capsys):
    """`kohaku index` runs are runs of the jobs the UI launches, filed under the code
    location `workspace.yaml` names, with the document as their partition."""
    from dagster import RunsFilter
    from dagster._core.storage.tags import PARTITION_NAME_TAG, REPOSITORY_LABEL_TAG

    settings, corpus = env
    assert cli_main(["index", "--lake", settings.lake_root, "--corpus", str(corpus)]) == 0
    capsys.readouterr()
    runs = instance_for(settings.lake.root).get_runs()
    assert sorted(r.job_name for r in runs) == ["assemble_indexes"] + ["index_document"] * 3
    for run in runs:
        origin = run.remote_job_origin
        assert origin is not None and origin.location_name == "kohaku-lake" and origin.job_name == run.job_name
        assert run.run_config["resources"]["settings"]["config"]["lake_root"] == settings.lake_root
    partitions = sorted(r.tags.get(PARTITION_NAME_TAG, "") for r in runs if r.job_name == "index_document")
    assert partitions == ["carbon", "gpu", "water"]
    # What the job's page in the UI lists: its name and the repository label.
    mine = RunsFilter(job_name="index_document", tags={REPOSITORY_LABEL_TAG: "__repository__@kohaku-lake"})
    assert len(instance_for(settings.lake.root).get_runs(filters=mine)) == 3


def test_search_without_index_says_what_to_do(tmp_path, capsys):
    assert cli_main(["search", "x", "--lake", str(tmp_path / "none"), "--corpus", str(tmp_path)]) == 2
    assert "kohaku index" in capsys.readouterr().err


def test_index_with_a_missing_corpus_refuses_before_creating_the_lake(tmp_path, capsys):
    lake = tmp_path / "lake"
    args = ["index", "--lake", str(lake), "--corpus", str(tmp_path / "typo")]
    assert cli_main(args) == 2
    err = capsys.readouterr().err
    assert "corpus folder" in err and "does not exist; pass --corpus DIR" in err
    assert not lake.exists()  # no skeleton (index_config.json, .dagster) left behind
    with pytest.raises(FileNotFoundError, match="corpus folder"):
        kr.index(tmp_path / "typo", lake, progress=quiet)
    assert not lake.exists()


def test_sensor_registers_new_documents(env, monkeypatch):
    settings, corpus = env
    from dagster import build_sensor_context

    from kohaku_assets.sensors import corpus_sensor

    (corpus / "metadata.csv").write_text("id,title,url\nremote,Remote,http://127.0.0.1:9/remote.pdf\n")
    instance = instance_for(settings.lake.root)
    result = corpus_sensor(build_sensor_context(resources=resources_for(settings), instance=instance))
    added = [r for r in result.dynamic_partitions_requests if type(r).__name__ == "AddDynamicPartitionsRequest"]
    # a document listed only by URL is registered and requested too (its source step downloads it)
    assert sorted(added[0].partition_keys) == ["carbon", "gpu", "remote", "water"]
    assert sorted(r.partition_key for r in result.run_requests) == ["carbon", "gpu", "remote", "water"]
    shutil.rmtree(corpus)
    corpus.mkdir()


def test_listed_document_is_fetched_from_its_url(env, tmp_path):
    """A document in metadata.csv with a URL but no local file is downloaded over HTTP."""
    import functools
    import http.server
    import threading

    settings, corpus = env
    # The server is on 127.0.0.1: an intranet host, which downloads refuse unless allowed.
    intranet = tmp_path / "intranet.toml"
    intranet.write_text("download_allow_private_hosts = true\n")
    settings = KohakuSettings(
        lake_root=settings.lake_root, corpus_dir=settings.corpus_dir, index_config_file=str(intranet)
    )
    served = tmp_path / "served"
    served.mkdir()
    (served / "remote.txt").write_text("Remote report\n\nThe remote facility reported a PUE of 1.12 in 2024.\n")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/remote.txt"
        (corpus / "metadata.csv").write_text(
            f"id,title,url\nremote,Remote report,{url}\nghost,Gone,http://127.0.0.1:9/none.pdf\n"
        )
        report = run_index(settings, progress=quiet)
    finally:
        server.shutdown()
    assert "remote" in report.recomputed
    assert "ghost" in report.failed and "download of ghost failed" in report.failed["ghost"]
    assert (settings.lake.sources_dir / "remote.txt").exists()
    assert "remote" in _store_docs(settings)
    # Offline now: the fetched document is kept, the unreachable one is retried and fails alone.
    again = run_index(settings, progress=quiet)
    assert "remote" in again.skipped and "remote" not in again.removed
    assert "ghost" not in again.removed and "download of ghost failed" in again.failed["ghost"]
    assert "remote" in _store_docs(settings)


def test_code_location_loads():
    """What `dagster dev` loads: every asset, job, sensor and schedule resolves together."""
    import kohaku_assets.definitions as defs_module

    repo = defs_module.defs.get_repository_def()
    assert {"index_document", "assemble_indexes", "answer_config", "vote_ensemble"} <= {
        j.name for j in repo.get_all_jobs()
    }
    assert {"corpus_sensor", "configs_sensor", "ensemble_specs_sensor"} <= {s.name for s in repo.sensor_defs}
    # One process per run, not per step, for the jobs and the asset graph's own materializations;
    # the per-document and per-config jobs' executor sends steps to Celery workers when
    # KOHAKU_CELERY_BROKER is set (tests/cluster), else it is the in-process one.
    from dagster import in_process_executor

    from kohaku_assets.cluster import DISTRIBUTED_JOBS, kohaku_executor

    assert {j.name: j.executor_def for j in repo.get_all_jobs()} == {
        j.name: kohaku_executor if j.name in DISTRIBUTED_JOBS else in_process_executor for j in repo.get_all_jobs()
    }


def test_demo_generates_indexes_and_searches_the_sample_corpus(tmp_path, monkeypatch, capsys):
    """`make demo` without the answering step: sample PDFs → Dagster index → search."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "lake" / ".dagster"))
    corpus = tmp_path / "corpus"
    assert cli_main(["demo", "--lake", str(tmp_path / "lake"), "--corpus", str(corpus), "--no-ask"]) == 0
    out = capsys.readouterr().out
    assert len(list(corpus.glob("*.pdf"))) == 3 and "generated the sample corpus" in out
    assert "$ kohaku search 'Which GPU had the lowest power draw?'" in out and "kohaku ui --lake" in out
    assert Lake(tmp_path / "lake").vectors_path.exists()
