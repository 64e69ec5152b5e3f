"""What `kohaku doctor` finds, a plain `kohaku index` repairs: damage the cheap size+mtime
check misses (bytes rewritten in place, the mtime put back) and record tables whose rows
were deleted or garbled behind a valid Parquet footer."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_lake_repair import DOCS, QUESTION, _cli, _index, _search_docs, env  # noqa: F401 - the fixture

from kohaku_rag.indexing import assembly
from kohaku_rag.indexing import steps as ix
from tests.support.small_disk import small_disk_at

KOHAKU = [sys.executable, "-c", "import sys; from kohaku_assets.cli import main; sys.exit(main())"]


def _rewrite_in_place(path, start: int, length: int = 64) -> None:
    """Overwrite bytes inside the file, its size and mtime kept (`touch -r`)."""
    stat = path.stat()
    data = bytearray(path.read_bytes())
    start = min(start, len(data) - length)
    data[start : start + length] = bytes((b ^ 0x5A) for b in data[start : start + length])
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _doctor(settings, capsys, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    status = _cli(settings, "doctor", *extra)
    out = capsys.readouterr()
    return status, out.out + out.err


@pytest.mark.parametrize("part", ["vectors", "bm25"])
def test_what_doctor_finds_in_an_index_file_a_plain_index_rebuilds(env, capsys, part):  # noqa: F811
    """What doctor finds in an index file, the next plain `kohaku index` rebuilds, as doctor
    says, even though the file's size and mtime are unchanged."""
    settings, _ = env
    assert _index(settings, capsys)[0] == 0
    before = _search_docs(settings, capsys)
    live = settings.lake.vectors_path if part == "vectors" else settings.lake.bm25_path
    for suffix in ("-wal", "-shm"):
        live.with_name(live.name + suffix).unlink(missing_ok=True)
    _rewrite_in_place(live, live.stat().st_size // 2)
    status, out = _doctor(settings, capsys)
    assert status == 1 and live.name in out and "Traceback" not in out, out
    status, out = _index(settings, capsys)
    assert status == 0 and "rebuilding the" in out, out
    assert _doctor(settings, capsys)[0] == 0
    assert _search_docs(settings, capsys) == before


def test_rows_deleted_from_a_record_table_are_found_and_recomputed(env, capsys):  # noqa: F811
    """Rows deleted from index_rows/<doc>.parquet (valid Parquet, its version kept) are found by
    doctor, and the next rebuild recomputes the table instead of indexing what is left."""
    settings, _ = env
    assert _index(settings, capsys)[0] == 0
    path = settings.lake.table(ix.INDEX_ROWS, "gpu")
    table = pq.read_table(path)
    whole = table.num_rows
    pq.write_table(table.slice(0, whole // 2), path)  # the schema's metadata (its version) kept
    status, out = _doctor(settings, capsys)
    assert status == 1 and "gpu.parquet" in out and "rows" in out, out
    for suffix in ("", "-wal", "-shm"):  # a rebuild is needed
        settings.lake.vectors_path.with_name(settings.lake.vectors_path.name + suffix).unlink(missing_ok=True)
    status, out = _index(settings, capsys)
    assert status == 0 and "recomputing gpu" in out, out
    assert pq.read_table(path).num_rows == whole
    assert not assembly.indexes_behind(settings.lake, DOCS).behind
    assert _doctor(settings, capsys)[0] == 0


@pytest.mark.parametrize("doctor_first", [True, False])
def test_garbled_rows_behind_a_valid_footer_fall_back_to_the_corpus(env, capsys, doctor_first):  # noqa: F811
    """Random bytes inside index_rows/<doc>.parquet (footer intact) are found, and the next
    `kohaku index` recomputes the table from the intact corpus file, with no hand deletion."""
    settings, _ = env
    assert _index(settings, capsys)[0] == 0
    before = _search_docs(settings, capsys)
    path = settings.lake.table(ix.INDEX_ROWS, "gpu")
    _rewrite_in_place(path, 200, 400)
    if doctor_first:
        status, out = _doctor(settings, capsys)
        assert status == 1 and "gpu.parquet" in out, out
    for suffix in ("", "-wal", "-shm"):
        settings.lake.vectors_path.with_name(settings.lake.vectors_path.name + suffix).unlink(missing_ok=True)
    status, out = _index(settings, capsys)  # the damage found by doctor, or while assembling
    assert status == 0 and "recomputing gpu" in out and "Traceback" not in out, out
    assert _doctor(settings, capsys)[0] == 0
    assert _search_docs(settings, capsys) == before


@contextmanager
def _deadline(seconds: int):
    """Fails the test instead of reading forever (as main did on /dev/zero)."""

    def expired(*_args) -> None:
        raise TimeoutError(f"still reading after {seconds} s")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("how", ["device", "outside link"])
def test_the_manifest_names_only_regular_files_of_the_index_folder(env, capsys, tmp_path, how):  # noqa: F811
    """A manifest naming /dev/zero or a link to a file outside the lake is refused in one line
    by search, doctor and index: nothing reads forever, and the lake's own copy is kept."""
    settings, _ = env
    assert _index(settings, capsys)[0] == 0
    before = _search_docs(settings, capsys)
    manifest_path = settings.lake.manifest_path
    manifest = json.loads(manifest_path.read_text())
    files = manifest["parts"]["bm25"]["files"]
    own = settings.lake.index_dir / files["bm25"]["name"]
    if how == "device":
        files["bm25"].update(name="/dev/zero", size=0)
        manifest_path.write_text(json.dumps(manifest))
    else:
        outside = tmp_path / "elsewhere.npz"
        shutil.copy2(own, outside)
        own.unlink()
        own.symlink_to(outside)
    with _deadline(60):
        capsys.readouterr()
        assert _cli(settings, "search", QUESTION) == 2
        err = capsys.readouterr().err
        assert ("/dev/zero" if how == "device" else "not a regular file") in err, err
        assert len(err.strip().splitlines()) == 1, err
        status, out = _doctor(settings, capsys)
        assert status == 1 and "Traceback" not in out, out
        status, out = _index(settings, capsys)
        assert status == 0, out
    assert _doctor(settings, capsys)[0] == 0
    assert _search_docs(settings, capsys) == before
    if how == "outside link":
        assert outside.exists()  # what lies outside the lake is never touched
        assert not any(p.is_symlink() for p in settings.lake.index_dir.iterdir())


@pytest.fixture()
def small_disk(tmp_path: Path):
    """A real 12 MB file system (tmpfs); skipped where mounting is not allowed."""
    with small_disk_at(tmp_path, 12) as folder:
        yield folder


def test_a_full_disk_is_one_line_naming_the_folder(small_disk, corpus):
    """A full disk is one line naming the folder, from `index` and from doctor: no traceback."""
    lake = small_disk / "lake"
    environ = {**os.environ, "DAGSTER_HOME": str(lake / ".dagster")}

    def kohaku(*args: str) -> subprocess.CompletedProcess[str]:
        command = [*KOHAKU, *args, "--lake", str(lake), "--corpus", str(corpus)]
        return subprocess.run(command, env=environ, capture_output=True, text=True, timeout=300)

    assert kohaku("index").returncode == 0
    with (small_disk / "filler").open("wb") as filler:  # the disk fills up
        try:
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
        except OSError:
            pass
    (corpus / "gpu.md").write_text((corpus / "gpu.md").read_text() + "\nThe B200 drew 1000 W.\n")
    done = kohaku("index")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"the disk holding {lake} is full" in done.stderr and "free at least" in done.stderr
    doctor = kohaku("doctor")
    # The index is intact but behind the corpus (gpu.md changed and was not indexed): a finding.
    assert doctor.returncode == 1 and "Traceback" not in doctor.stdout + doctor.stderr, doctor.stderr
    assert len(doctor.stderr.strip().splitlines()) <= 1
