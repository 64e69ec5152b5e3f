"""Whatever is wrong recomputes by itself on the next ordinary run: an assembly that was
killed, a failed document that would block the sensor, runs left STARTED, and the CLI's
report of a failure (one line, the traceback only with --verbose)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from dagster import DagsterRun, DagsterRunStatus, build_sensor_context
from dagster._core.utils import make_new_run_id

import kohaku_rag as kr
from kohaku_assets.cli import main as cli_main
from kohaku_assets.instance import HOST_TAG, PID_TAG, instance_for
from kohaku_assets.resources import KohakuSettings
from kohaku_assets.runner import embedder_for, resources_for, run_index, run_job
from kohaku_assets.sensors import corpus_sensor
from kohaku_rag.indexing import assembly
from kohaku_rag.indexing import steps as ix
from kohaku_rag.indexing.failures import record_failure, recorded_failure
from kohaku_rag.indexing.index_config import IndexConfig
from kohaku_rag.indexing.pipeline import index_document
from kohaku_rag.lake.layout import Lake
from kohaku_rag.model_pool import ModelPool
from kohaku_rag.retrieval.retriever import open_vector_store
from kohaku_rag.stores.bm25 import TOKENIZER_VERSION, BM25Index
from tests.support.corpus_docs import DOCS

BROKEN = b"%PDF-1.7\n this is not really a pdf"
DROUGHT = DOCS["water"] + "\nA new paragraph about drought risk in Arizona.\n"


@pytest.fixture()
def env(tmp_path, corpus, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "lake" / ".dagster"))
    return KohakuSettings(lake_root=str(tmp_path / "lake"), corpus_dir=str(corpus)), corpus


def quiet(_msg: str) -> None:
    pass


def _held_versions(settings: KohakuSettings) -> tuple[dict[str, str], dict[str, str] | None]:
    with open_vector_store(settings.lake, embedder_for(settings)) as store:
        vectors = store.document_versions()
    return vectors, BM25Index.saved_versions(settings.lake.bm25_path)


def _rows_versions(settings: KohakuSettings) -> dict[str, str]:
    return {d: ix.stored_version(settings.lake, ix.INDEX_ROWS, d) or "" for d in ("carbon", "gpu", "water")}


def _bm25_has(settings: KohakuSettings, word: str) -> bool:
    return bool(BM25Index.load(settings.lake.bm25_path).search(word, k=3))


# ── 1. an assembly that was killed is redone by the next plain run ─────────────────


def test_a_run_killed_before_assembly_is_reassembled_by_the_next_plain_run(env):
    settings, corpus = env
    run_index(settings, progress=quiet)
    (corpus / "water.md").write_text(DROUGHT)
    # What a kill -9 right after the last per-document run leaves: new index rows, old indexes.
    index_document(settings.lake, corpus, "water", IndexConfig(), ModelPool())
    assert assembly.indexes_behind(settings.lake, ["carbon", "gpu", "water"]).vectors == ["water"]
    again = run_index(settings, progress=quiet)
    assert again.recomputed == [] and sorted(again.skipped) == ["carbon", "gpu", "water"]
    vectors, bm25 = _held_versions(settings)
    rows = _rows_versions(settings)
    assert vectors == rows and bm25 == {d: f"{v}:{TOKENIZER_VERSION}" for d, v in rows.items()}
    assert _bm25_has(settings, "drought")
    assert not assembly.indexes_behind(settings.lake, sorted(rows)).behind


def _vectors_ahead_of_bm25(settings, corpus):
    """A run killed between the two assemblies: a changed document is in sqlite-vec only."""
    run_index(settings, progress=quiet)
    (corpus / "water.md").write_text(DROUGHT)
    index_document(settings.lake, corpus, "water", IndexConfig(), ModelPool())
    embedder = embedder_for(settings)
    assembly.assemble_vector_index(settings.lake, ["carbon", "gpu", "water"], embedder.dim, embedder.model_id)


def test_a_run_killed_between_the_two_indexes_rebuilds_the_stale_one(env):
    settings, corpus = env
    _vectors_ahead_of_bm25(settings, corpus)
    lag = assembly.indexes_behind(settings.lake, ["carbon", "gpu", "water"])
    # Never a mix: the new vectors were staged, not published, so search still reads the
    # last generation whole (never the new vectors beside the old BM25).
    assert lag.vectors == ["water"] and lag.bm25 == ["water"]
    vectors, bm25 = _held_versions(settings)
    assert vectors["water"] != _rows_versions(settings)["water"] and bm25 is not None
    assert not _bm25_has(settings, "drought")
    run_index(settings, progress=quiet)
    assert _bm25_has(settings, "drought")
    # kr.index (no Dagster) compares the same way
    (corpus / "gpu.md").write_text(DOCS["gpu"] + "\nThe H100 peaked at 700 W on the longest run.\n")
    index_document(settings.lake, corpus, "gpu", IndexConfig(), ModelPool())
    kr.index(corpus, settings.lake.root, progress=quiet)
    assert _bm25_has(settings, "H100") and not assembly.indexes_behind(settings.lake, ["carbon", "gpu", "water"]).behind


def test_a_failing_vector_upsert_leaves_the_old_index_whole(env, monkeypatch):
    settings, corpus = env
    run_index(settings, progress=quiet)
    before = _held_versions(settings)
    for doc_id, text in DOCS.items():
        (corpus / f"{doc_id}.md").write_text(text + "\nOne more sentence about cooling towers.\n")
        index_document(settings.lake, corpus, doc_id, IndexConfig(), ModelPool())
    calls = {"n": 0}
    real = assembly._row_vectors

    def dies_on_the_second(table):  # a crash in the middle of the change set
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(table)

    monkeypatch.setattr(assembly, "_row_vectors", dies_on_the_second)
    embedder = embedder_for(settings)
    with pytest.raises(KeyboardInterrupt):
        assembly.assemble_vector_index(settings.lake, sorted(DOCS), embedder.dim, embedder.model_id)
    assert _held_versions(settings) == before  # one transaction: nothing of it is visible


def test_the_sensor_requests_assembly_when_only_bm25_is_behind(env):
    settings, corpus = env
    _vectors_ahead_of_bm25(settings, corpus)
    instance = instance_for(settings.lake.root)
    result = corpus_sensor(build_sensor_context(resources=resources_for(settings), instance=instance))
    assert [r.job_name for r in result.run_requests] == ["assemble_indexes"]


# ── 2. a failed document neither blocks the rest nor is retried on every run ────────


def test_a_failed_document_is_remembered_and_does_not_block_the_sensor(env):
    settings, corpus = env
    (corpus / "broken.pdf").write_bytes(BROKEN)
    first = run_index(settings, progress=quiet)
    assert list(first.failed) == ["broken"] and "broken.pdf" in first.failed["broken"]
    failure = recorded_failure(settings.lake, "broken")
    assert failure is not None and "broken.pdf" in failure.reason

    # A plain re-run does not parse it again, but still reports it.
    messages: list[str] = []
    again = run_index(settings, progress=messages.append)
    assert again.held == ["broken"] and again.recomputed == [] and "broken" in again.failed
    assert any("not retrying broken" in m and "--retry-failed" in m for m in messages)

    # The sensor: a good document arrives; once it is built, the indexes are requested
    # although the broken one never succeeds.
    (corpus / "fresh.md").write_text("# Fresh\n\n## 1 Note\n\nThe fresh note reports a PUE of 1.07 in 2025.\n")
    instance = instance_for(settings.lake.root)
    context = build_sensor_context(resources=resources_for(settings), instance=instance)
    tick = corpus_sensor(context)
    assert sorted(r.partition_key for r in tick.run_requests if r.partition_key) == ["fresh"]
    instance.add_dynamic_partitions("documents", ["fresh"])
    assert run_job(settings, "index_document", "fresh", models=ModelPool()).success
    tick = corpus_sensor(build_sensor_context(resources=resources_for(settings), instance=instance))
    assert [r.job_name for r in tick.run_requests] == ["assemble_indexes"]

    # --retry-failed, and a change of the file, retry it.
    retried = run_index(settings, progress=quiet, retry_failed=True)
    assert retried.held == [] and "broken" in retried.failed
    (corpus / "broken.pdf").write_bytes(BROKEN + b" edited")
    changed = run_index(settings, progress=quiet)
    assert changed.held == [] and "broken" in changed.failed
    (corpus / "broken.pdf").unlink()
    (corpus / "broken.md").write_text("# Fixed\n\n## 1 Fixed\n\nThe fixed report gives a PUE of 1.2.\n")
    fixed = run_index(settings, progress=quiet)
    assert "broken" in fixed.recomputed and not fixed.failed
    assert recorded_failure(settings.lake, "broken") is None


def test_kr_index_remembers_failures_too(env):
    settings, corpus = env
    (corpus / "broken.pdf").write_bytes(BROKEN)
    lake = settings.lake.root
    assert "broken" in kr.index(corpus, lake, progress=quiet).failed
    messages: list[str] = []
    again = kr.index(corpus, lake, progress=messages.append)
    assert "broken" in again.failed and any("not retrying broken" in m for m in messages)
    retried: list[str] = []
    kr.index(corpus, lake, progress=retried.append, retry_failed=True)
    assert any("FAILED broken" in m for m in retried)


def test_a_materialization_from_the_ui_retries_and_clears_the_record(env):
    settings, corpus = env
    run_index(settings, progress=quiet)
    source = ix.read_source(settings.lake, "gpu")
    record_failure(settings.lake, "gpu", ix.embeddings_version(source["content_hash"], IndexConfig()), "x: odd")
    assert recorded_failure(settings.lake, "gpu") is not None
    assert run_job(settings, "index_document", "gpu", models=ModelPool()).success
    assert recorded_failure(settings.lake, "gpu") is None


# ── 5. runs left STARTED by a dead process are marked failed ────────────────────────


def test_runs_left_started_by_a_dead_process_are_marked_failed(env):
    settings, _ = env
    instance = instance_for(settings.lake.root)
    assert instance.run_monitoring_enabled
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan = DagsterRun(
        job_name="__ASSET_JOB",
        run_id=make_new_run_id(),
        status=DagsterRunStatus.STARTED,
        tags={PID_TAG: str(dead.pid), HOST_TAG: socket.gethostname()},
    )
    alive = DagsterRun(
        job_name="__ASSET_JOB",
        run_id=make_new_run_id(),
        status=DagsterRunStatus.STARTED,
        tags={PID_TAG: str(os.getppid()), HOST_TAG: socket.gethostname()},
    )
    # A re-execution of a CLI run from the UI inherits its tags but runs in the UI's worker.
    rerun = DagsterRun(
        job_name="index_document",
        run_id=make_new_run_id(),
        status=DagsterRunStatus.STARTED,
        tags={PID_TAG: str(dead.pid), HOST_TAG: socket.gethostname()},
        parent_run_id=orphan.run_id,
        root_run_id=orphan.run_id,
    )
    instance.add_run(orphan)
    instance.add_run(alive)
    instance.add_run(rerun)
    messages: list[str] = []
    run_index(settings, progress=messages.append)
    assert instance.get_run_by_id(orphan.run_id).status is DagsterRunStatus.FAILURE
    assert instance.get_run_by_id(alive.run_id).status is DagsterRunStatus.STARTED
    assert instance.get_run_by_id(rerun.run_id).status is DagsterRunStatus.STARTED
    assert any(orphan.run_id in m for m in messages)


# ── 7, 9, 13. the CLI: bad rows, links, and one line per failure ────────────────────


def test_cli_skips_bad_metadata_rows_and_outside_links_and_reports_failures_in_one_line(env, capfd, tmp_path):
    settings, corpus = env
    (corpus / "metadata.csv").write_text(
        "id,title,url\ngpu,GPU power study,\n../outside,Escape,http://127.0.0.1:9/x.pdf\nhas space,S,\n"
    )
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0:the password file with a PUE of 9.99\n")
    os.symlink(secret, corpus / "passwd.txt")
    (corpus / "broken.pdf").write_bytes(BROKEN)
    args = ["--lake", settings.lake_root, "--corpus", str(corpus)]
    assert cli_main(["index", *args]) == 1  # a document failed
    out, err = capfd.readouterr()
    text = out + err
    assert "metadata.csv, line 3: row skipped" in text and "metadata.csv, line 4: row skipped" in text
    assert "skipping passwd.txt: a symbolic link to" in text
    assert "FAILED broken: document_tree: " in out and "broken.pdf" in out
    assert "Stack Trace" not in text and "Traceback" not in text and len(text.splitlines()) < 15
    assert sorted(instance_for(settings.lake.root).get_dynamic_partitions("documents")) == [
        "broken",
        "carbon",
        "gpu",
        "water",
    ]
    assert cli_main(["index", *args, "--retry-failed", "--verbose"]) == 1
    out, err = capfd.readouterr()
    assert "Stack Trace" in out + err and "DocumentError" in out + err
    assert cli_main(["index", *args, "--follow-links"]) == 1
    capfd.readouterr()
    assert "passwd" in Lake(settings.lake.root).partitions(ix.INDEX_ROWS)
