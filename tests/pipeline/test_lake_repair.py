"""A lake can't be bricked: the indexes are derived from the per-document tables, so an index
that is missing, garbled, half-built or missing rows is rebuilt by the next ordinary
`kohaku index` (or `kr.index`); a stored table that can't be read is recomputed, naming the
file; search on a broken index exits non-zero with the fix; one writer at a time."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time

import apsw
import pytest
import sqlite_vec

import kohaku_rag as kr
from kohaku_assets.cli import main as cli_main
from kohaku_assets.resources import KohakuSettings
from kohaku_rag.indexing import assembly
from kohaku_rag.indexing import steps as ix
from kohaku_rag.lake.layout import Lake
from kohaku_rag.lake.lock import LakeBusy, current_holder, hold_lake
from kohaku_rag.stores.vectors import VectorStore

DOCS = ["carbon", "gpu", "water"]
QUESTION = "How much water did the data center use?"


@pytest.fixture()
def env(tmp_path, corpus, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "lake" / ".dagster"))
    return KohakuSettings(lake_root=str(tmp_path / "lake"), corpus_dir=str(corpus)), corpus


def _cli(settings: KohakuSettings, *args: str) -> int:
    return cli_main([args[0], "--lake", settings.lake_root, "--corpus", settings.corpus_dir, *args[1:]])


def _search_docs(settings: KohakuSettings, capsys) -> list[str]:
    capsys.readouterr()
    assert _cli(settings, "search", QUESTION, "--json") == 0
    return sorted({item["doc_id"] for item in json.loads(capsys.readouterr().out)})


def _index(settings: KohakuSettings, capsys, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    status = _cli(settings, "index", *extra)
    out = capsys.readouterr()
    return status, out.out + out.err


def _garble(path, data: bytes = b"this is not an index " * 200) -> None:
    for suffix in ("-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.unlink(f"{path}{suffix}")
    path.write_bytes(data)


# ── 1. the vector index rebuilds itself ───────────────────────────────────────────


def test_a_deleted_vector_index_is_rebuilt_by_the_next_kohaku_index(env, capsys):
    settings, _ = env
    assert _index(settings, capsys)[0] == 0
    before = _search_docs(settings, capsys)
    for suffix in ("", "-wal", "-shm"):
        settings.lake.vectors_path.with_name(settings.lake.vectors_path.name + suffix).unlink(missing_ok=True)
    status, out = _index(settings, capsys)
    assert status == 0, out
    assert "Traceback" not in out and "DagsterInvalidDefinitionError" not in out
    assert "rebuilding the vector index" in out and "is missing" in out
    assert _search_docs(settings, capsys) == before
    assert not assembly.indexes_behind(settings.lake, DOCS).behind


def test_a_garbled_vector_index_fails_search_with_the_fix_then_rebuilds(env, capsys):
    settings, _ = env
    assert _index(settings, capsys)[0] == 0
    before = _search_docs(settings, capsys)
    live = settings.lake.vectors_path
    _garble(live)
    capsys.readouterr()
    assert _cli(settings, "search", QUESTION) == 2
    err = capsys.readouterr().err
    assert live.name in err and "kohaku index" in err and "Traceback" not in err
    status, out = _index(settings, capsys)
    assert status == 0, out
    assert "rebuilding the vector index" in out and "when it was published" in out
    assert _search_docs(settings, capsys) == before


def test_search_never_creates_an_empty_index_in_a_lake_without_one(env, capsys):
    settings, _ = env
    settings.lake.root.mkdir(parents=True)
    capsys.readouterr()
    assert _cli(settings, "search", QUESTION) == 2
    assert "kohaku index" in capsys.readouterr().err
    assert not settings.lake.vectors_path.exists()


def test_a_half_built_index_from_a_killed_assembly_is_never_searched_and_is_rebuilt(env, capsys):
    """A kill at the start of assembly never leaves a store with its schema and no documents
    for search to answer from with exit 0: a rebuild happens beside the live file, and the
    leftover of a killed build is ignored by readers and cleared."""
    settings, _ = env
    assert _index(settings, capsys)[0] == 0
    before = _search_docs(settings, capsys)
    lake = settings.lake
    for suffix in ("", "-wal", "-shm"):
        lake.vectors_path.with_name(lake.vectors_path.name + suffix).unlink(missing_ok=True)
    # A killed build: a file of the next generation, with its schema and no rows.
    leftover = lake.index_dir / "vectors.0123456789ab.sqlite"
    VectorStore(leftover, 384, model_id="x").close()
    capsys.readouterr()
    assert _cli(settings, "search", QUESTION) == 2
    assert _index(settings, capsys)[0] == 0
    assert not leftover.exists()
    assert _search_docs(settings, capsys) == before


def test_rows_deleted_from_the_store_are_noticed_and_re_upserted(env, capsys):
    settings, _ = env
    assert _index(settings, capsys)[0] == 0
    assert "water" in _search_docs(settings, capsys)
    conn = apsw.Connection(str(settings.lake.vectors_path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.execute("DELETE FROM nodes WHERE doc_id = 'water'")
    conn.close()
    (lag,) = assembly.indexes_behind(settings.lake, DOCS).vectors
    assert "checksum differs" in lag
    capsys.readouterr()
    assert _cli(settings, "search", QUESTION) == 2
    status, out = _index(settings, capsys)
    assert status == 0, out
    assert not assembly.indexes_behind(settings.lake, DOCS).behind
    assert "water" in _search_docs(settings, capsys)


def test_a_garbled_bm25_index_fails_search_with_the_fix_then_rebuilds(env, capsys):
    settings, _ = env
    assert _index(settings, capsys)[0] == 0
    before = _search_docs(settings, capsys)
    live = settings.lake.bm25_path
    data = live.read_bytes()
    live.write_bytes(data[: len(data) // 2])
    capsys.readouterr()
    assert _cli(settings, "search", QUESTION) == 2
    err = capsys.readouterr().err
    assert live.name in err and "kohaku index" in err and "Traceback" not in err
    assert _index(settings, capsys)[0] == 0
    assert _search_docs(settings, capsys) == before


def test_kr_index_rebuilds_a_garbled_vector_index_too(tmp_path, corpus):
    lines: list[str] = []
    kr.index(corpus, tmp_path / "lake", progress=lines.append)
    lake = Lake(tmp_path / "lake")
    _garble(lake.vectors_path)
    lines.clear()
    kr.index(corpus, tmp_path / "lake", progress=lines.append)
    assert any("rebuilding the vector index" in line and "when it was published" in line for line in lines), lines
    assert {h.doc_id for h in kr.open(tmp_path / "lake").search(QUESTION)} >= {"water"}


# ── 3. a stored table that can't be read is missing, not fatal ─────────────────────


def test_a_truncated_index_rows_table_is_recomputed_naming_the_file(env, capsys):
    settings, _ = env
    assert _index(settings, capsys)[0] == 0
    before = _search_docs(settings, capsys)
    rows = settings.lake.table(ix.INDEX_ROWS, "water")
    data = rows.read_bytes()
    rows.write_bytes(data[: len(data) // 2])
    status, out = _index(settings, capsys)
    assert status == 0, out
    assert str(rows) in out and "water" in out
    assert "Traceback" not in out
    assert ix.stored_version(settings.lake, ix.INDEX_ROWS, "water") is not None
    assert _search_docs(settings, capsys) == before
    # and the next run is quiet again
    status, out = _index(settings, capsys)
    assert status == 0 and "recomputed 0" in out


def test_an_unreadable_token_cache_is_recomputed(env, capsys):
    settings, _ = env
    assert _index(settings, capsys)[0] == 0
    cache = ix.bm25_tokens_path(settings.lake, "gpu")
    cache.write_bytes(b"PAR1 garbage")
    settings.lake.bm25_path.unlink()
    assert _index(settings, capsys)[0] == 0
    assert "gpu" in assembly.assemble_bm25(settings.lake, DOCS).tokenized or cache.stat().st_size > 100


# ── 2. one writer per lake ────────────────────────────────────────────────────────


def _hold_for(lake_root: str, seconds: float, ready) -> None:  # runs in a child process
    with hold_lake(lake_root, "test holder"):
        ready.set()
        time.sleep(seconds)


def test_a_second_writer_waits_for_the_first_or_exits_2_with_no_wait(env, capsys):
    settings, _ = env
    assert _index(settings, capsys)[0] == 0
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold_for, args=(settings.lake_root, 4.0, ready))
    holder.start()
    try:
        assert ready.wait(60)
        with pytest.raises(LakeBusy, match=f"pid {holder.pid}"), hold_lake(settings.lake.root, "second", wait=False):
            pass
        status, out = _index(settings, capsys, "--no-wait")
        assert status == 2 and f"pid {holder.pid}" in out and "Traceback" not in out
        started = time.monotonic()
        status, out = _index(settings, capsys)
        assert status == 0, out
        assert f"waiting for the lake lock held by pid {holder.pid}" in out
        assert time.monotonic() - started > 1.0
    finally:
        holder.join(30)


def test_a_lock_left_by_a_killed_process_is_taken_over(env, capsys):
    settings, _ = env
    settings.lake.root.mkdir(parents=True)
    script = (
        "import os, sys, time; from kohaku_rag.lake.lock import hold_lake\n"
        "with hold_lake(sys.argv[1], 'doomed'):\n    print('held', flush=True); time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script, settings.lake_root], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    child.kill()
    child.wait()
    holder = current_holder(settings.lake.root)
    assert holder is not None and holder.pid == child.pid
    said: list[str] = []
    with hold_lake(settings.lake.root, "next", wait=False, say=said.append):
        pass
    assert any(f"left by pid {child.pid}" in s for s in said), said
    assert current_holder(settings.lake.root) is None


def test_the_lock_is_re_entrant_within_a_process(tmp_path):
    with hold_lake(tmp_path, "outer") as outer, hold_lake(tmp_path, "inner", wait=False) as inner:
        assert outer == inner


# ── kohaku doctor ─────────────────────────────────────────────────────────────────


def test_doctor_lists_what_is_wrong_and_repair_fixes_it(env, capsys):
    settings, _ = env
    assert _index(settings, capsys)[0] == 0
    capsys.readouterr()
    assert _cli(settings, "doctor") == 0
    assert "healthy" in capsys.readouterr().out
    rows = settings.lake.table(ix.INDEX_ROWS, "gpu")
    rows.write_bytes(rows.read_bytes()[:100])
    live = settings.lake.vectors_path
    _garble(live)
    leftover = settings.lake.index_dir / ".bm25.npz.abc.tmp"
    leftover.write_bytes(b"half")
    capsys.readouterr()
    assert _cli(settings, "doctor") == 1
    out = capsys.readouterr().out
    assert "gpu.parquet" in out and live.name in out and ".bm25.npz.abc.tmp" in out
    assert "Traceback" not in out
    assert _cli(settings, "doctor", "--repair") == 0
    out = capsys.readouterr().out
    assert "healthy" in out and "moved" in out
    assert not leftover.exists()
    assert _search_docs(settings, capsys) == ["carbon", "gpu", "water"] or "water" in _search_docs(settings, capsys)
