"""Faults never freeze a wrong result: kill -9 `kohaku index` at many moments, feed it bad inputs.

    python bench/faults/faults.py                 # 14+ kills over an incremental run, 12 bad inputs,
                                           # 17 damaged lakes, two writers, 6 kills during a rebuild
    python bench/faults/faults.py --work /tmp/kohaku-faults --only damage,doctor,writers,rebuild

Kills: a lake holds 6 documents; 2 change; `kohaku index` is killed with SIGKILL at a
moment of its run (spread over the per-document runs and the index assembly, found from
its progress lines and a measured timeline). Search right after the kill must return what
the lake held before the run, or a clean build of the new corpus, or refuse (never a mix of
the two); then a plain `kohaku index` runs, and `kohaku search --json` must return exactly
what a clean build of the same corpus returns, with no run of the lake's Dagster instance
left STARTED.

Bad inputs: each is dropped into a copy of the good corpus; `kohaku index` must exit 0 or
1, index every good document, name the bad input in at most a few lines, not index what
it must not (a link out of the folder), and a plain re-run must recompute nothing.

Damaged lakes: a built lake has one file deleted, cut in half or garbled (each index, a
per-document table, a cache), or rows deleted behind the store's back. `kohaku search` before
the repair must refuse with a message or be right (never exit 0 with other results, never a
traceback); a plain `kohaku index` must repair it, search must then equal a clean build's, the
next run recompute nothing and `kohaku doctor` exit 0. Two writers: two `kohaku index` at once
(and one with --no-wait). Kills during a rebuild: the vector index deleted, the rebuild killed.

Prints one line per trial, then the counts per kind.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pymupdf
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # runs from a checkout, uninstalled

from kohaku_rag.samples import make_bad_pdfs  # noqa: E402

KOHAKU = [sys.executable, "-c", "import sys; from kohaku_assets.cli import main; sys.exit(main())"]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}

TOPICS = {
    "gpu": "The A100 GPU drew {w} W on average while training the model for {h} hours.",
    "water": "The water usage effectiveness was {w} liters per kWh for the facility in {h}.",
    "carbon": "Carbon intensity of the grid was {w} gCO2e per kWh in the region over {h} months.",
    "pue": "The power usage effectiveness of the data center was 1.{w} during {h} weeks of load.",
    "cooling": "Evaporative cooling towers withdrew {w} cubic meters of water in {h} days.",
    "embodied": "Embodied emissions of the servers were {w} kgCO2e each over {h} years of service.",
}
QUERIES = [
    "How much power did the A100 draw?",
    "water usage effectiveness liters per kWh",
    "grid carbon intensity gCO2e",
    "power usage effectiveness of the data center",
    "embodied emissions of servers",
]


def document(doc_id: str, version: int) -> str:
    """A small Markdown document; version 2 changes its numbers and adds a paragraph."""
    w, h = (400 + 7 * len(doc_id), 12) if version == 1 else (455 + 3 * len(doc_id), 30)
    body = " ".join(TOPICS[doc_id].format(w=w, h=h + k) for k in range(6))
    extra = f"\n\nA revision note: the {doc_id} figures were re-measured in 2025." if version == 2 else ""
    return f"# {doc_id.title()} study\n\n## 1 Results\n\n{body}\n\n## 2 Method\n\n{body[::-1][:200]}{extra}\n"


def write_corpus(folder: Path, changed: tuple[str, ...] = ()) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for doc_id in TOPICS:
        (folder / f"{doc_id}.md").write_text(document(doc_id, 2 if doc_id in changed else 1))
    return folder


def kohaku(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KOHAKU, *args], env=ENV, capture_output=True, text=True, timeout=timeout)


def index(lake: Path, corpus: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return kohaku("index", "--lake", str(lake), "--corpus", str(corpus), "--json", *extra)


# KohakuRAG's published setting searches sentence vectors too: damage there is read by search.
SEARCH_CONFIG = '[retrieval]\ndense_kinds = ["sentence", "paragraph"]\n'


def search(lake: Path, corpus: Path) -> subprocess.CompletedProcess[str]:
    """`kohaku search` for every query (one process: --questions), sentences and paragraphs."""
    questions = lake.parent / f"{lake.name}_questions.csv"
    questions.write_text("id,question\n" + "".join(f"q{i},{q}\n" for i, q in enumerate(QUERIES)))
    config = lake.parent / f"{lake.name}_search.toml"
    config.write_text(SEARCH_CONFIG)
    where = ["--lake", str(lake), "--corpus", str(corpus)]
    return kohaku("search", "--questions", str(questions), *where, "--k", "5", "--config", str(config))


def search_all(lake: Path, corpus: Path) -> list[object]:
    done = search(lake, corpus)
    if done.returncode != 0:
        return [f"search failed: {done.stderr[-300:]}"]
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def runs_left_started(lake: Path) -> int:
    probe = (
        "import sys; from dagster import DagsterRunStatus, RunsFilter;"
        "from kohaku_assets.instance import instance_for;"
        "i = instance_for(sys.argv[1]);"
        "print(len(i.get_runs(filters=RunsFilter(statuses=[DagsterRunStatus.STARTED]))))"
    )
    done = subprocess.run([sys.executable, "-c", probe, str(lake)], env=ENV, capture_output=True, text=True)
    return int(done.stdout.strip() or -1)


# ── kills ──────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Moment:
    """When to kill: `delay` seconds after the progress line containing `after` (or
    after the start when `after` is empty)."""

    name: str
    after: str
    delay: float


def run_and_kill(lake: Path, corpus: Path, moment: Moment) -> tuple[bool, float]:
    """Start `kohaku index`, SIGKILL it at `moment`; returns (killed before it ended, seconds)."""
    proc = subprocess.Popen(
        [*KOHAKU, "index", "--lake", str(lake), "--corpus", str(corpus)],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    started = time.perf_counter()
    seen = threading.Event() if moment.after else None

    def watch() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if seen is not None and moment.after in line:
                seen.set()

    threading.Thread(target=watch, daemon=True).start()
    if seen is not None:
        seen.wait(timeout=300)
    time.sleep(moment.delay)
    killed = proc.poll() is None
    if killed:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    return killed, time.perf_counter() - started


def measure(base_lake: Path, corpus: Path, work: Path) -> float:
    """Seconds of an uninterrupted incremental run (2 of 6 documents changed)."""
    lake = work / "measure"
    shutil.copytree(base_lake, lake)
    t0 = time.perf_counter()
    done = index(lake, corpus)
    if done.returncode != 0:
        raise SystemExit(f"the reference run failed: {done.stderr[-2000:]}")
    return time.perf_counter() - t0


def start_and_target(work: Path) -> tuple[Path, Path, list[object]]:
    """A lake built from corpus v1, corpus v2 (2 of 6 documents changed), and what a clean
    build of v2 answers: the starting point and the expected end of an interrupted run."""
    v1 = write_corpus(work / "corpus_v1")
    v2 = write_corpus(work / "corpus_v2", changed=("gpu", "water"))
    base = work / "lake_v1"
    if index(base, v1).returncode != 0:
        raise SystemExit("building the starting lake failed")
    clean = work / "lake_clean"
    if index(clean, v2).returncode != 0:
        raise SystemExit("the clean build failed")
    return base, v2, search_all(clean, v2)


def kills(work: Path, n_timed: int) -> tuple[int, int]:
    base, v2, expected = start_and_target(work)
    before_change = search_all(base, v2)  # the last generation, whole (what a reader may still get)
    duration = measure(base, v2, work)
    print(f"uninterrupted incremental run: {duration:.1f}s; clean-build answers for {len(QUERIES)} queries")
    moments = [Moment(f"t={f:.2f}x", "", f * duration) for f in _spread(n_timed)]
    moments += [
        Moment("after doc 1 +0.0s", "[1/2] indexed", 0.0),
        Moment("after doc 1 +0.4s", "[1/2] indexed", 0.4),
        Moment("after doc 2 +0.0s (assembly)", "[2/2] indexed", 0.0),
        Moment("after doc 2 +0.3s (assembly)", "[2/2] indexed", 0.3),
        Moment("after doc 2 +0.8s (assembly)", "[2/2] indexed", 0.8),
        Moment("after doc 2 +1.5s (assembly)", "[2/2] indexed", 1.5),
    ]
    # The incremental assembly itself (vectors, BM25, search aids, then the publish), finely.
    moments += [
        Moment(f"after doc 2 +{d:.1f}s (assembly)", "[2/2] indexed", d)
        for d in (0.1, 0.2, 0.45, 0.6, 1.0, 1.2, 2.0, 2.5)
    ]
    survived = tried = 0
    for k, moment in enumerate(moments, start=1):
        lake = work / f"kill_{k}"
        shutil.copytree(base, lake)
        killed, at = run_and_kill(lake, v2, moment)
        # Between the kill and the next run a reader gets the old index or the new, or a
        # refusal: never a mix (new BM25 with old vectors, say).
        between = _search_outcome(lake, v2, expected)
        if between == "WRONG RESULTS" and search_all(lake, v2) == before_change:
            between = "old"
        rerun = index(lake, v2)
        got = search_all(lake, v2)
        started = runs_left_started(lake)
        ok = rerun.returncode == 0 and got == expected and started == 0 and between in ("same", "old", "refused")
        # A run that had already ended was not killed: shown, but not counted as a kill.
        tried += killed
        survived += killed and ok
        summary = json.loads(rerun.stdout.strip().splitlines()[-1]) if rerun.returncode == 0 else {}
        print(
            f"kill {k:2d} {moment.name:30s} at {at:5.1f}s killed={killed!s:5s} search then: {between:8s} -> re-run recomputed "
            f"{summary.get('recomputed', '?')}, search {'identical' if got == expected else 'DIFFERS'}, "
            f"runs left STARTED {started}: {'ok' if ok else 'FAILED'}"
        )
        shutil.rmtree(lake, ignore_errors=True)
    return survived, tried


def _spread(n: int) -> list[float]:
    """n moments between 20% and 90% of the run (before that, Python is still importing)."""
    return [0.2 + 0.7 * i / max(n - 1, 1) for i in range(n)]


# ── a damaged lake, two writers, kills during a rebuild ─────────────────────────


def _sqlite_side_files(path: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def live(lake: Path, part: str) -> str:
    """The lake-relative path of an index file: the one the manifest names (index
    generations), or the fixed name of a lake from before them (the baseline's)."""
    manifest = lake / "index" / "manifest.json"
    legacy = {"vectors": "index/vectors.sqlite", "bm25": "index/bm25.npz"}[part]
    if not manifest.exists():
        return legacy
    entry = json.loads(manifest.read_text())["parts"][part]["files"][part]
    return f"index/{entry['name']}"


def _delete(rel: str) -> Callable[[Path], None]:
    def damage(lake: Path) -> None:
        target = lake / _resolve(lake, rel)
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink()
            _sqlite_side_files(target)

    return damage


def _resolve(lake: Path, rel: str) -> str:
    return live(lake, rel) if rel in ("vectors", "bm25") else rel


def _truncate(rel: str) -> Callable[[Path], None]:
    def damage(lake: Path) -> None:
        target = lake / _resolve(lake, rel)
        _sqlite_side_files(target)
        data = target.read_bytes()
        target.write_bytes(data[: len(data) // 2])

    return damage


def _garble(rel: str) -> Callable[[Path], None]:
    def damage(lake: Path) -> None:
        target = lake / _resolve(lake, rel)
        _sqlite_side_files(target)
        target.write_bytes(os.urandom(max(target.stat().st_size, 4096)))

    return damage


def _random_bytes_inside(rel: str, size: int, at: float) -> Callable[[Path], None]:
    """`size` random bytes at `at` of the file (the rest, its directory and header, whole)."""

    def damage(lake: Path) -> None:
        target = lake / _resolve(lake, rel)
        length = target.stat().st_size
        with open(target, "r+b") as f:
            f.seek(int(length * at))
            f.write(os.urandom(min(size, length - int(length * at) - 64)))

    return damage


def _vectors_conn(lake: Path):  # noqa: ANN202 (apsw is imported here only)
    import apsw
    import sqlite_vec

    conn = apsw.Connection(str(lake / live(lake, "vectors")))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    return conn


def _delete_rows(lake: Path) -> None:
    conn = _vectors_conn(lake)
    conn.execute("DELETE FROM nodes WHERE doc_id = 'water'")
    conn.close()


def _delete_vec_rows(lake: Path) -> None:
    """One document's vectors deleted, its nodes and `documents` row kept."""
    conn = _vectors_conn(lake)
    for kind in ("sentence", "paragraph"):
        ids = conn.execute("SELECT id FROM nodes WHERE doc_id = 'water' AND kind = ?", (kind,)).fetchall()
        conn.executemany(f"DELETE FROM vec_{kind} WHERE id = ?", ids)
    conn.close()


def _rewrite_vectors(lake: Path) -> None:
    """Every paragraph vector replaced by another unit vector: SQLite's structure intact."""
    import numpy as np

    conn = _vectors_conn(lake)
    rng = np.random.default_rng(11)
    for (rowid,) in conn.execute("SELECT id FROM nodes WHERE kind = 'paragraph'").fetchall():
        vec = rng.standard_normal(384).astype(np.float32)
        conn.execute(
            "UPDATE vec_paragraph SET embedding = ? WHERE id = ?", ((vec / np.linalg.norm(vec)).tobytes(), rowid)
        )
    conn.close()


def _half_built(lake: Path) -> None:
    """What a kill in the middle of a rebuild leaves: no index, the file being built beside it."""
    index = lake / live(lake, "vectors")
    shutil.copy(index, index.with_name(".vectors.sqlite.building"))
    index.unlink()
    _sqlite_side_files(index)


DAMAGES: dict[str, Callable[[Path], None]] = {
    "vector store deleted": _delete("vectors"),
    "vector store garbled": _garble("vectors"),
    "vector store cut in half": _truncate("vectors"),
    "vector store: nodes of a document deleted": _delete_rows,
    "vector store: vec rows of a document deleted": _delete_vec_rows,
    "vector store: vector bytes rewritten in place": _rewrite_vectors,
    "vector store: random bytes over 3 pages": _random_bytes_inside("vectors", 3 * 4096, 0.5),
    "vector store half-built beside, none live": _half_built,
    "bm25 deleted": _delete("bm25"),
    "bm25 cut in half": _truncate("bm25"),
    "bm25 garbled": _garble("bm25"),
    "bm25: 4 KiB of random bytes inside": _random_bytes_inside("bm25", 4096, 0.4),
    "whole index/ folder deleted": _delete("index"),
    "index_rows/water.parquet cut in half": _truncate("index_rows/water.parquet"),
    "document_tree/gpu.parquet garbled": _garble("document_tree/gpu.parquet"),
    "node_embeddings/gpu.parquet cut in half": _truncate("node_embeddings/gpu.parquet"),
    "bm25 token cache of gpu cut in half": _truncate("cache/bm25_tokens/gpu.parquet"),
}


def _search_outcome(lake: Path, corpus: Path, expected: list[object]) -> str:
    """ "same" (identical to a clean build), "refused" (non-zero, a message, no traceback),
    or what is wrong: a search must never exit 0 with other results, nor show a traceback."""
    done = search(lake, corpus)
    if "Traceback" in done.stderr or "apsw." in done.stderr:
        return "TRACEBACK"
    if done.returncode != 0:
        return "refused" if done.stderr.strip() else "SILENT FAILURE"
    got = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return "same" if got == expected else "WRONG RESULTS"


def damages(work: Path) -> tuple[int, int]:
    """Each damage on a copy of a built lake: search before the repair refuses or is right,
    a plain `kohaku index` exits 0 (one line saying what it rebuilt), search is then
    identical to a clean build and the next run recomputes nothing; what `kohaku doctor`
    still finds (damage no search reads), `kohaku doctor --repair` fixes with search unchanged."""
    corpus = write_corpus(work / "corpus")
    clean = work / "lake_clean"
    if index(clean, corpus).returncode != 0:
        raise SystemExit("the clean build failed")
    expected = search_all(clean, corpus)
    repaired = 0
    for k, (name, damage) in enumerate(DAMAGES.items(), start=1):
        lake = work / f"damage_{k}"
        shutil.copytree(clean, lake)
        damage(lake)
        before = _search_outcome(lake, corpus, expected)
        fix = index(lake, corpus)
        said = [line for line in fix.stderr.splitlines() if "rebuil" in line or "recomputing" in line]
        after = _search_outcome(lake, corpus, expected)
        again = index(lake, corpus)
        quiet = again.returncode == 0 and json.loads(again.stdout.strip().splitlines()[-1])["recomputed"] == 0
        doctor = kohaku("doctor", "--lake", str(lake), "--corpus", str(corpus))
        # What `kohaku index` does not read (a table only a rebuild reads, a cache) is
        # `kohaku doctor`'s to find; --repair must fix it and leave search as it was.
        repair = "-"
        if doctor.returncode != 0:
            fixed = kohaku("doctor", "--repair", "--lake", str(lake), "--corpus", str(corpus))
            repair = f"exit {fixed.returncode}, search {_search_outcome(lake, corpus, expected)}"
        ok = (
            before in ("same", "refused")
            and fix.returncode == 0
            and "Traceback" not in fix.stderr
            and after == "same"
            and quiet
            and repair in ("-", "exit 0, search same")
        )
        repaired += ok
        print(
            f"damage {k:2d} {name:45s} search before: {before:8s} index: exit {fix.returncode} "
            f"({said[0][:70] if said else 'no line'}) search after: {after:5s} next run quiet: {quiet!s:5s} "
            f"doctor: exit {doctor.returncode}, --repair: {repair}: {'ok' if ok else 'FAILED'}"
        )
        shutil.rmtree(lake, ignore_errors=True)
    return repaired, len(DAMAGES)


def two_writers(work: Path) -> tuple[int, int]:
    """Two `kohaku index` at once on one lake (2 of 6 documents changed): both exit 0, one
    waits for the other's lock, the result is a clean build's; `--no-wait` exits 2 at once."""
    base, v2, expected = start_and_target(work)
    ok_count = 0
    trials = [("two plain writers", ()), ("second with --no-wait", ("--no-wait",))]
    for k, (name, extra) in enumerate(trials, start=1):
        lake = work / f"writers_{k}"
        shutil.copytree(base, lake)
        cmd = [*KOHAKU, "index", "--lake", str(lake), "--corpus", str(v2), "--json"]
        first = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(4.0)  # the first is past its imports and holds the lock
        second = subprocess.run([*cmd, *extra], env=ENV, capture_output=True, text=True, timeout=600)
        out1, err1 = first.communicate(timeout=600)
        rerun = index(lake, v2)
        got = search_all(lake, v2)
        waited = "waiting for the lake lock" in second.stderr
        if extra:
            ok = first.returncode == 0 and second.returncode == 2 and "Traceback" not in second.stderr
        else:
            ok = first.returncode == 0 and second.returncode == 0 and waited
        ok = ok and got == expected and rerun.returncode == 0
        ok_count += ok
        print(
            f"writers {k} {name:24s} first exit {first.returncode}, second exit {second.returncode} "
            f"(waited: {waited}), search {'identical' if got == expected else 'DIFFERS'}: {'ok' if ok else 'FAILED'}"
        )
        shutil.rmtree(lake, ignore_errors=True)
    return ok_count, len(trials)


def rebuild_kills(work: Path, n: int) -> tuple[int, int]:
    """The vector index deleted, then `kohaku index` (a full rebuild) killed at n moments:
    search before the re-run must refuse or be right, never answer with a half-built index."""
    corpus = write_corpus(work / "corpus")
    clean = work / "lake_clean"
    index(clean, corpus)
    expected = search_all(clean, corpus)
    lake = work / "measure"
    shutil.copytree(clean, lake)
    _delete("vectors")(lake)
    t0 = time.perf_counter()
    index(lake, corpus)
    duration = time.perf_counter() - t0
    survived = tried = 0
    for k, f in enumerate(_spread(n), start=1):
        lake = work / f"rebuild_kill_{k}"
        shutil.rmtree(lake, ignore_errors=True)
        shutil.copytree(clean, lake)
        _delete("vectors")(lake)
        killed, at = run_and_kill(lake, corpus, Moment(f"t={f:.2f}x", "", f * duration))
        before = _search_outcome(lake, corpus, expected)
        rerun = index(lake, corpus)
        after = _search_outcome(lake, corpus, expected)
        ok = before in ("same", "refused") and rerun.returncode == 0 and after == "same"
        tried += killed
        survived += killed and ok
        print(
            f"rebuild kill {k} at {at:5.1f}s killed={killed!s:5s} search before re-run: {before:8s} "
            f"after: {after}: {'ok' if ok else 'FAILED'}"
        )
        shutil.rmtree(lake, ignore_errors=True)
    return survived, tried


# ── bad inputs ───────────────────────────────────────────────────────────────


def _big_figure_pdf(path: Path) -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=4000, height=4000)
    for k in range(6):
        page.insert_text((40, 60 + 14 * k), "The accelerator drew 400 W during the training run.", fontsize=11)
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(buf, format="PNG")
    page.insert_image(pymupdf.Rect(40, 200, 2840, 3000), stream=buf.getvalue())
    doc.save(path)


def _bad_pdf(kind: str) -> Callable[[Path, Path], str]:
    def make(corpus: Path, scratch: Path) -> str:
        made = make_bad_pdfs(scratch / "bad_pdfs")[kind]
        shutil.copy(made, corpus / made.name)
        return made.name

    return make


def _write(name: str, data: bytes) -> Callable[[Path, Path], str]:
    def make(corpus: Path, _scratch: Path) -> str:
        (corpus / name).write_bytes(data)
        return name

    return make


def _link_out(corpus: Path, scratch: Path) -> str:
    secret = scratch / "secret.txt"
    secret.write_text("root:x:0:0:SECRETWORD leaked from outside the corpus\n")
    (corpus / "passwd.txt").symlink_to(secret)
    return "passwd.txt"


def _metadata(corpus: Path, _scratch: Path) -> str:
    (corpus / "metadata.csv").write_text(
        'id,title,url\ngpu,GPU study,\n../outside,Escape,http://127.0.0.1:9/x.pdf\nhas space,S,\nodd,"open quote,\nlast,Last,\n'
    )
    return "metadata.csv"


def _huge_figure(corpus: Path, _scratch: Path) -> str:
    _big_figure_pdf(corpus / "bomb.pdf")
    return "bomb.pdf"


BAD_INPUTS: dict[str, Callable[[Path, Path], str]] = {
    "corrupt PDF": _bad_pdf("corrupt"),
    "encrypted PDF": _bad_pdf("encrypted"),
    "PDF without text": _bad_pdf("empty"),
    "scanned PDF": _bad_pdf("image_only"),
    "PDF with a 34-megapixel figure": _huge_figure,
    "JSON of the wrong shape": _write("shape.json", json.dumps({"sections": ["page one", 2]}).encode()),
    "JSON nested 200,000 deep": _write("deep.json", b'{"sections": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"),
    "JSON not JSON": _write("garbled.json", b'{"sections": [ {"paragraphs": '),
    "Latin-1 text": _write("latin.txt", "Caf\xe9 cr\xe8me and a PUE of 1.4.".encode("latin-1")),
    "empty Markdown": _write("empty.md", b""),
    "link out of the corpus": _link_out,
    "metadata.csv with bad rows": _metadata,
}
GOOD = sorted(TOPICS)


def bad_inputs(work: Path) -> tuple[int, int]:
    good = write_corpus(work / "good")
    base = work / "lake_good"
    if index(base, good).returncode != 0:
        raise SystemExit("indexing the good corpus failed")
    isolated = 0
    for k, (name, make) in enumerate(BAD_INPUTS.items(), start=1):
        corpus, scratch, lake = work / f"bad_{k}", work / f"scratch_{k}", work / f"bad_lake_{k}"
        shutil.copytree(good, corpus)
        scratch.mkdir()
        shutil.copytree(base, lake)
        culprit = make(corpus, scratch)
        first = index(lake, corpus)
        output = first.stdout + first.stderr
        summary = json.loads(first.stdout.strip().splitlines()[-1]) if first.stdout.strip() else {}
        rerun = index(lake, corpus)
        again = json.loads(rerun.stdout.strip().splitlines()[-1]) if rerun.stdout.strip() else {}
        leaked = (
            "SECRETWORD"
            in json.dumps(search_all(lake, corpus))
            + kohaku("search", "SECRETWORD", "--lake", str(lake), "--corpus", str(corpus), "--json").stdout
        )
        indexed_good = set(GOOD) <= set(summary.get("skipped_partitions", [])) | set(
            summary.get("recomputed_partitions", [])
        )
        checks = {
            "exit 0/1": first.returncode in (0, 1),
            "good documents indexed": indexed_good,
            "named": culprit in output,
            "short": len(output.splitlines()) <= 12 and "Stack Trace" not in output,
            "nothing leaked": not leaked,
            "re-run recomputes nothing": rerun.returncode in (0, 1) and again.get("recomputed") == 0,
        }
        ok = all(checks.values())
        isolated += ok
        failed = [c for c, passed in checks.items() if not passed]
        print(
            f"bad {k:2d} {name:32s} exit {first.returncode}, {len(output.splitlines())} lines: "
            f"{'isolated' if ok else 'NOT isolated: ' + ', '.join(failed)}"
        )
        if not ok:
            print("   " + output[-800:].replace("\n", "\n   "))
        for path in (corpus, scratch, lake):
            shutil.rmtree(path, ignore_errors=True)
    return isolated, len(BAD_INPUTS)


def _mtime_kept(damage: Callable[[Path], None], rel: str) -> Callable[[Path], None]:
    """The damage, then the file's size and mtime put back (`touch -r`): what the cheap
    size+mtime check of an ordinary run cannot see."""

    def hidden(lake: Path) -> None:
        target = lake / _resolve(lake, rel)
        stat = target.stat()
        damage(lake)
        _sqlite_side_files(target)
        os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))

    return hidden


def _half_the_rows(rel: str) -> Callable[[Path], None]:
    """Half the rows of a record table deleted: valid Parquet, its version kept."""

    def damage(lake: Path) -> None:
        import pyarrow.parquet as pq

        table = pq.read_table(lake / rel)
        pq.write_table(table.slice(0, table.num_rows // 2), lake / rel)

    return damage


def _then_rebuild_needed(damage: Callable[[Path], None]) -> Callable[[Path], None]:
    def both(lake: Path) -> None:
        damage(lake)
        _delete("vectors")(lake)

    return both


def _manifest_names(name: str) -> Callable[[Path], None]:
    def damage(lake: Path) -> None:
        path = lake / "index" / "manifest.json"
        manifest = json.loads(path.read_text())
        manifest["parts"]["bm25"]["files"]["bm25"].update(name=name, size=0)
        path.write_text(json.dumps(manifest))

    return damage


def _link_outside(lake: Path) -> None:
    """The live BM25 file replaced by a link to a copy outside the lake."""
    own = lake / live(lake, "bm25")
    outside = lake.parent / f"{lake.name}-outside.npz"
    shutil.copy2(own, outside)
    own.unlink()
    own.symlink_to(outside)


# Damage only a deep check sees: `kohaku doctor` must find it (exit 1, naming it, quickly),
# then a plain `kohaku index` must repair it and `kohaku doctor` find nothing.
DOCTOR_DAMAGES: dict[str, Callable[[Path], None]] = {
    "vector store: vectors rewritten, mtime put back": _mtime_kept(_rewrite_vectors, "vectors"),
    "vector store: random bytes over 3 pages, mtime put back": _mtime_kept(
        _random_bytes_inside("vectors", 3 * 4096, 0.5), "vectors"
    ),
    "bm25: random bytes inside, mtime put back": _mtime_kept(_random_bytes_inside("bm25", 4096, 0.4), "bm25"),
    "index_rows/water.parquet: half its rows deleted": _then_rebuild_needed(_half_the_rows("index_rows/water.parquet")),
    "index_rows/gpu.parquet: random bytes inside": _then_rebuild_needed(
        _random_bytes_inside("index_rows/gpu.parquet", 300, 0.2)
    ),
    "manifest names /dev/zero": _manifest_names("/dev/zero"),
    "manifest names ../../outside.npz": _manifest_names("../../outside.npz"),
    "the live bm25 file a link to a copy outside": _link_outside,
}


def doctor_damages(work: Path) -> tuple[int, int]:
    """Each damage of DOCTOR_DAMAGES on a copy of a built lake: doctor finds it (exit 1 within
    two minutes, no traceback), a plain `kohaku index` exits 0, search then equals a clean
    build's, the next run recomputes nothing, doctor exits 0."""
    corpus = write_corpus(work / "corpus")
    clean = work / "lake_clean"
    if index(clean, corpus).returncode != 0:
        raise SystemExit("the clean build failed")
    expected = search_all(clean, corpus)
    repaired = 0
    for k, (name, damage) in enumerate(DOCTOR_DAMAGES.items(), start=1):
        lake = work / f"doctor_{k}"
        shutil.copytree(clean, lake)
        damage(lake)
        try:
            found = kohaku("doctor", "--lake", str(lake), "--corpus", str(corpus), timeout=120)
            doctor_first = f"exit {found.returncode}" + (" TRACEBACK" if "Traceback" in found.stderr else "")
            fix = index(lake, corpus)
            after = _search_outcome(lake, corpus, expected)
            again = index(lake, corpus)
            quiet = again.returncode == 0 and json.loads(again.stdout.strip().splitlines()[-1])["recomputed"] == 0
            healthy = kohaku("doctor", "--lake", str(lake), "--corpus", str(corpus), timeout=120).returncode == 0
        except subprocess.TimeoutExpired:
            doctor_first, fix, after, quiet, healthy = "TIMED OUT", None, "-", False, False
        ok = doctor_first == "exit 1" and fix is not None and fix.returncode == 0 and after == "same"
        ok = ok and quiet and healthy
        repaired += ok
        print(
            f"doctor damage {k:2d} {name:55s} doctor: {doctor_first:9s} index: exit "
            f"{fix.returncode if fix is not None else '-'} search after: {after:5s} next run quiet: {quiet!s:5s} "
            f"doctor after: {'healthy' if healthy else 'NOT healthy'}: {'ok' if ok else 'FAILED'}"
        )
        shutil.rmtree(lake, ignore_errors=True)
    return repaired, len(DOCTOR_DAMAGES)


def _count(label: str, pair: tuple[int, int]) -> str:
    return f"{label}: {pair[0]} / {pair[1]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="", help="scratch folder (default: a temporary one)")
    parser.add_argument("--timed-kills", type=int, default=8, help="kills at moments spread over the run's time")
    parser.add_argument(
        "--only", default="", help="comma-separated: kills,bad,damage,doctor,writers,rebuild (default: all)"
    )
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="kohaku-faults-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    t0 = time.perf_counter()
    only = set(args.only.split(",")) if args.only else {"kills", "bad", "damage", "doctor", "writers", "rebuild"}
    lines = []
    if "damage" in only:
        lines.append(_count("damaged lakes repaired / tried", damages(work / "damage")))
    if "doctor" in only:
        lines.append(
            _count("damage only doctor sees, repaired by a plain index / tried", doctor_damages(work / "doctor"))
        )
    if "writers" in only:
        lines.append(_count("two-writer trials ok / tried", two_writers(work / "writers")))
    if "rebuild" in only:
        lines.append(_count("kills during a rebuild survived / tried", rebuild_kills(work / "rebuild", 6)))
    if "kills" in only:
        lines.append(_count("kills survived / tried", kills(work / "kills", args.timed_kills)))
    if "bad" in only:
        lines.append(_count("bad inputs isolated / tried", bad_inputs(work / "bad")))
    for line in lines:
        print(line)
    print(f"({time.perf_counter() - t0:.0f}s)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
