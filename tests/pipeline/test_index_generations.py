"""Search never answers from a damaged or half-written index.

Each damage leaves its file *readable*, so search could answer from it (exit 0, other
results or a raw `apsw` traceback). Search refuses in one line naming the fix, doctor names
the file, and a plain `kohaku index` puts it right (search gives what a clean build gives).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import apsw
import numpy as np
import pytest
import sqlite_vec

from kohaku_assets.cli import main as cli_main
from kohaku_assets.resources import KohakuSettings
from kohaku_rag.indexing import steps as ix
from kohaku_rag.lake.layout import Lake

QUESTIONS = ["How much water did the data center use?", "Which GPU had the lowest power draw?", "carbon emissions"]


@pytest.fixture()
def env(tmp_path, corpus, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "lake" / ".dagster"))
    config = tmp_path / "published.toml"
    # KohakuRAG's published setting searches sentence vectors too (where a raw apsw error could surface).
    config.write_text('[retrieval]\ndense_kinds = ["sentence", "paragraph"]\n')
    return KohakuSettings(lake_root=str(tmp_path / "lake"), corpus_dir=str(corpus)), config


def _cli(settings: KohakuSettings, *args: str) -> int:
    return cli_main([args[0], "--lake", settings.lake_root, "--corpus", settings.corpus_dir, *args[1:]])


def _results(settings: KohakuSettings, config: Path, capsys) -> list[list[str]]:
    found = []
    for question in QUESTIONS:
        capsys.readouterr()
        assert _cli(settings, "search", question, "--json", "--config", str(config)) == 0
        found.append([item["node_id"] for item in json.loads(capsys.readouterr().out)])
    return found


def _vectors_conn(lake: Lake) -> apsw.Connection:
    conn = apsw.Connection(str(lake.vectors_path))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    return conn


def _delete_vec_rows(lake: Lake) -> None:
    conn = _vectors_conn(lake)
    for kind in ("sentence", "paragraph"):
        ids = conn.execute("SELECT id FROM nodes WHERE doc_id = 'water' AND kind = ?", (kind,)).fetchall()
        conn.executemany(f"DELETE FROM vec_{kind} WHERE id = ?", ids)
    conn.close()


def _rewrite_vectors(lake: Lake) -> None:
    conn = _vectors_conn(lake)
    rng = np.random.default_rng(7)
    ids = conn.execute("SELECT id FROM nodes WHERE kind = 'paragraph'").fetchall()
    for (rowid,) in ids:
        vec = rng.standard_normal(384).astype(np.float32)
        conn.execute(
            "UPDATE vec_paragraph SET embedding = ? WHERE id = ?", ((vec / np.linalg.norm(vec)).tobytes(), rowid)
        )
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()


def _random_pages(lake: Lake) -> None:
    path = lake.vectors_path
    size = path.stat().st_size
    rng = np.random.default_rng(3)
    with open(path, "r+b") as f:
        for page in (size // 4096 // 3, size // 4096 // 2, size // 4096 - 2):
            f.seek(page * 4096 + 100)
            f.write(rng.bytes(3000))


def _garble_bm25(lake: Lake) -> None:
    # Inside the arrays' data (4 KiB, or less in this small file), leaving the zip's directory
    # at the end and the version arrays at the start whole: the file still opens.
    path = lake.bm25_path
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(size * 2 // 5)
        f.write(np.random.default_rng(5).bytes(min(4096, size * 3 // 10)))


DAMAGES: dict[str, Callable[[Lake], None]] = {
    "one document's vec rows deleted, its nodes kept": _delete_vec_rows,
    "vector bytes rewritten in place (integrity_check ok)": _rewrite_vectors,
    "random bytes over pages of the vector store": _random_pages,
    "4 KiB of random bytes inside the BM25 index": _garble_bm25,
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_but_readable_index_is_refused_then_healed_by_a_plain_index(env, capsys, damage):
    settings, config = env
    assert _cli(settings, "index") == 0
    clean = _results(settings, config, capsys)
    DAMAGES[damage](settings.lake)

    for question in QUESTIONS[:1]:
        capsys.readouterr()
        status = _cli(settings, "search", question, "--config", str(config))
        out = capsys.readouterr()
        assert status == 2, out.out
        assert "kohaku index" in out.err and "Traceback" not in out.err + out.out and "apsw" not in out.err
        assert len(out.err.strip().splitlines()) == 1

    capsys.readouterr()
    assert _cli(settings, "doctor") == 1
    assert "index" in capsys.readouterr().out

    capsys.readouterr()
    assert _cli(settings, "index") == 0
    out = capsys.readouterr().out
    assert "rebuilding the" in out  # named in one line
    assert _results(settings, config, capsys) == clean
    capsys.readouterr()
    assert _cli(settings, "doctor") == 0


def test_doctor_finds_a_damage_that_kept_the_file_s_mtime(env, capsys):
    """Bytes rewritten and the mtime put back: the cheap checks can't see it (they cost
    nothing), `kohaku doctor` reads every checksum and every vector."""
    settings, _config = env
    assert _cli(settings, "index") == 0
    path = settings.lake.vectors_path
    stat = path.stat()
    _rewrite_vectors(settings.lake)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    capsys.readouterr()
    assert _cli(settings, "doctor") == 1
    assert path.name in capsys.readouterr().out


def test_a_cut_node_embeddings_table_is_recomputed_by_a_plain_index(env, capsys):
    settings, _config = env
    assert _cli(settings, "index") == 0
    table = settings.lake.table(ix.NODE_EMBEDDINGS, "gpu")
    data = table.read_bytes()
    table.write_bytes(data[: len(data) // 2])
    capsys.readouterr()
    assert _cli(settings, "index") == 0
    out = capsys.readouterr().out
    assert str(table) in out and "recomputed 1" in out
    assert ix.stored_version(settings.lake, ix.NODE_EMBEDDINGS, "gpu") is not None
    capsys.readouterr()
    assert _cli(settings, "index") == 0
    assert "recomputed 0" in capsys.readouterr().out


def test_a_generation_is_one_manifest_and_old_files_go(env, capsys):
    from kohaku_rag.lake.manifest import read_manifest  # new with generations

    settings, _config = env
    assert _cli(settings, "index") == 0
    lake = settings.lake
    first = read_manifest(lake.index_dir)
    assert first is not None and set(first.parts) == {"vectors", "bm25", "aids"}
    (Path(settings.corpus_dir) / "water.md").write_text("The data center used 1.2 million litres of water in 2023.\n")
    assert _cli(settings, "index") == 0
    second = read_manifest(lake.index_dir)
    assert second is not None and second.generation == first.generation + 1
    on_disk = {p.name for p in lake.index_dir.iterdir() if not p.name.startswith(".")}
    assert on_disk == second.names() | {"manifest.json"}  # the old generation's files are gone
    assert second.parts["vectors"].rows_versions == second.parts["bm25"].rows_versions


def test_doctor_says_a_missing_bm25_index_is_missing(env, capsys):
    """A missing BM25 file is called missing, not "differs from the stored rows"."""
    settings, _config = env
    assert _cli(settings, "index") == 0
    path = settings.lake.bm25_path
    path.unlink()
    capsys.readouterr()
    assert _cli(settings, "doctor") == 1
    out = capsys.readouterr().out
    assert f"{path.name} is missing" in out and "differs from the stored rows" not in out


def test_an_unreadable_manifest_is_refused_then_rebuilt(env, capsys):
    settings, config = env
    assert _cli(settings, "index") == 0
    clean = _results(settings, config, capsys)
    settings.lake.manifest_path.write_text('{"format_version": 1, "generation": ')
    capsys.readouterr()
    assert _cli(settings, "search", QUESTIONS[0]) == 2
    err = capsys.readouterr().err
    assert "manifest.json" in err and "kohaku index" in err and "Traceback" not in err
    assert _cli(settings, "index") == 0
    assert _results(settings, config, capsys) == clean
    on_disk = {p.name for p in settings.lake.index_dir.iterdir() if not p.name.startswith(".")}
    assert len(on_disk) == 5  # the manifest and the four files it names: the old ones are gone
