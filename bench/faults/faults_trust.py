"""Nothing untrusted is served quietly: a scenario per fault, each printing held or FAILED.

    python bench/faults/faults_trust.py [--work DIR] [--only tables,index,serve,disk,rows]

tables  an index_rows table with its row count and checksum stripped (and half its rows cut):
        `kohaku doctor` names it, a plain `kohaku index` restores every row, search as a clean build's.
index   the live vector store's bytes changed with its size and mtime kept (vectors rewritten
        in place; the older generation's file copied over it): a plain `kohaku index`, no doctor
        first, rebuilds it; search then as a clean build's.
serve   a running `kohaku serve`: the manifest deleted, the vectors garbled, the vectors rewritten
        in place before start: /healthz, search and ask all 503 naming the fix; a damaged
        served.sqlite: ask 503 naming `kohaku doctor`, which exits 1 and says how to recover it;
        a config with user:password@ in base_url beside api_key_env: 400 naming the config, no
        credential shown; no answer or error carries the lake's absolute path.
disk    the lake's disk full under a running server (a tmpfs): ask and /healthz 503, ask answers
        again once space is freed; sqlite-vec's failed chunk on a full disk read as a full disk.
rows    a document with a 10,000-row table: seconds and peak memory of `kohaku index`, and the
        line saying what was kept.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.faults.faults import index, kohaku, live, search_all, write_corpus  # noqa: E402
from tests.support.lake_damage import rewrite_vectors_in_place  # noqa: E402
from tests.support.qa_server import QAServer  # noqa: E402
from tests.support.serve_process import kohaku_serve  # noqa: E402
from tests.support.serving_corpus import WATER_QUESTION, write_config  # noqa: E402
from tests.support.small_disk import fill_disk  # noqa: E402

Outcome = tuple[bool, str]


def _report(name: str, outcome: Outcome) -> bool:
    held, detail = outcome
    print(f"{name:62s} {'held' if held else 'FAILED'}: {detail}")
    return held


def _built(work: Path, name: str) -> tuple[Path, Path, list[object]]:
    corpus = write_corpus(work / f"{name}_corpus")
    lake = work / name
    if index(lake, corpus).returncode != 0:
        raise SystemExit("the clean build failed")
    return lake, corpus, search_all(lake, corpus)


# ── tables ───────────────────────────────────────────────────────────────────


def stripped_table(work: Path) -> Outcome:
    import pyarrow.parquet as pq

    lake, corpus, expected = _built(work, "stripped")
    path = lake / "index_rows" / "water.parquet"
    table = pq.read_table(path)
    keep = {k: v for k, v in (table.schema.metadata or {}).items() if not k.startswith(b"kohaku.")}
    pq.write_table(table.slice(0, table.num_rows // 2).replace_schema_metadata(keep), path)
    doctor = kohaku("doctor", "--lake", str(lake), "--corpus", str(corpus))
    fixed = index(lake, corpus)
    rows = pq.read_metadata(path).num_rows
    same = search_all(lake, corpus) == expected
    held = doctor.returncode == 1 and "water.parquet" in doctor.stdout and fixed.returncode == 0
    held = held and rows == table.num_rows and same
    return (
        held,
        f"doctor exit {doctor.returncode}, index exit {fixed.returncode}, rows {rows}/{table.num_rows}, search {'same' if same else 'DIFFERS'}",
    )


# ── index ────────────────────────────────────────────────────────────────────


def _older_over_live(lake: Path, corpus: Path) -> None:
    older = lake.parent / f"{lake.name}-older.sqlite"
    shutil.copyfile(lake / live(lake, "vectors"), older)
    doc = corpus / "water.md"
    doc.write_text(doc.read_text().replace("liters per kWh", "litres per kWh"))
    index(lake, corpus)
    target = lake / live(lake, "vectors")
    stat = target.stat()
    data = older.read_bytes()[: stat.st_size]
    target.write_bytes(data + b"\0" * (stat.st_size - len(data)))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def changed_bytes(work: Path, name: str, damage: Callable[[Path, Path], None]) -> Outcome:
    lake, corpus, _ = _built(work, name)
    damage(lake, corpus)
    clean = work / f"{name}_clean"
    index(clean, corpus)
    expected = search_all(clean, corpus)
    fixed = index(lake, corpus)
    same = search_all(lake, corpus) == expected
    said = [ln for ln in (fixed.stdout + fixed.stderr).splitlines() if "rebuilding" in ln]
    held = fixed.returncode == 0 and same and bool(said)
    return (
        held,
        f"plain index exit {fixed.returncode} ({(said or ['no rebuild'])[0][:70]}), search {'same' if same else 'DIFFERS'}",
    )


# ── serve ────────────────────────────────────────────────────────────────────


def _served(work: Path, name: str) -> Path:
    lake, _corpus, _ = _built(work, name)
    return lake


def _ask(url: str, config: str | None = None) -> httpx.Response:
    body = {"question": WATER_QUESTION, **({"config": config} if config else {})}
    return httpx.post(f"{url}/api/ask", json=body, timeout=60)


def _all_503(url: str, lake: Path, words: tuple[str, ...]) -> Outcome:
    got = [httpx.get(f"{url}/healthz"), httpx.post(f"{url}/api/search", json={"question": WATER_QUESTION}), _ask(url)]
    codes = [r.status_code for r in got]
    text = " ".join(r.text for r in got)
    held = codes == [503, 503, 503] and all(w in text for w in words) and str(lake) not in text
    return held, f"healthz/search/ask {codes}" + ("" if str(lake) not in text else ", LAKE PATH SHOWN")


def serve_scenarios(work: Path, qa: QAServer) -> list[tuple[str, Outcome]]:
    out = []
    lake = _served(work, "serve_manifest")
    write_config(lake, "fake", qa.base_url)
    with kohaku_serve(lake, "--config", "fake") as url:
        before = httpx.get(f"{url}/healthz").status_code
        (lake / "index" / "manifest.json").unlink()
        held, detail = _all_503(url, lake, ("no index", "kohaku index"))
    out.append(("serve: manifest deleted", (held and before == 200, detail)))

    lake = _served(work, "serve_garbled")
    write_config(lake, "fake", qa.base_url)
    with kohaku_serve(lake, "--config", "fake") as url:
        target = lake / live(lake, "vectors")
        target.write_bytes(os.urandom(target.stat().st_size))
        out.append(("serve: vectors garbled", _all_503(url, lake, (target.name,))))

    lake = _served(work, "serve_rewritten")
    write_config(lake, "fake", qa.base_url)
    rewrite_vectors_in_place(lake / live(lake, "vectors"))
    with kohaku_serve(lake, "--config", "fake") as url:
        out.append(("serve: vectors rewritten in place before start", _all_503(url, lake, ("checksum",))))

    lake = _served(work, "serve_store")
    write_config(lake, "fake", qa.base_url)
    with kohaku_serve(lake, "--config", "fake") as url:
        first = _ask(url).status_code
        store = lake / "served" / "served.sqlite"
        for suffix in ("-wal", "-shm"):
            store.with_name(store.name + suffix).unlink(missing_ok=True)
        store.write_bytes(b"garbage " * 2000)
        r = _ask(url)
    doctor = kohaku("doctor", "--lake", str(lake), "--json")
    served = [f for f in json.loads(doctor.stdout.splitlines()[-1]) if f["area"] == "served"] if doctor.stdout else []
    held = first == 200 and r.status_code == 503 and "kohaku doctor" in r.text and str(lake) not in r.text
    held = held and doctor.returncode == 1 and bool(served) and ".recover" in served[0]["fix"]
    out.append(
        ("serve: served.sqlite garbled", (held, f"ask {first} then {r.status_code}, doctor exit {doctor.returncode}"))
    )

    lake = _served(work, "serve_creds")
    write_config(lake, "fake", qa.base_url)
    llm = {"backend": "openai", "model": "m", "base_url": "http://alice:s3cretpass@127.0.0.1:9/v1",
           "api_key_env": "FAULTS_TRUST_KEY"}  # fmt: skip
    (lake / "configs" / "creds.json").write_text(json.dumps({"questions": "unused.csv", "generation": {"llm": llm}}))
    os.environ["FAULTS_TRUST_KEY"] = "sk-faults-1234567890"
    with kohaku_serve(lake, "--config", "fake") as url:
        r = _ask(url, "creds")
    held = r.status_code == 400 and "creds" in r.text and "user:password@" in r.text and "s3cretpass" not in r.text
    out.append(("serve: user:pass@ base_url beside api_key_env", (held, f"ask {r.status_code}: {r.text[:90]}")))
    return out


# ── disk ─────────────────────────────────────────────────────────────────────


def _mount(folder: Path, size: str) -> bool:
    folder.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)]).returncode == 0


def full_disk_serving(work: Path, qa: QAServer) -> Outcome:
    disk = work / "small_disk"
    if not _mount(disk, "24m"):
        return False, "could not mount a tmpfs (needs root)"
    try:
        built = _served(work, "disk_lake")
        lake = Path(shutil.copytree(built, disk / "lake", ignore=shutil.ignore_patterns(".dagster")))
        write_config(lake, "fake", qa.base_url)
        with kohaku_serve(lake, "--config", "fake") as url:
            before = httpx.get(f"{url}/healthz").status_code
            filler = fill_disk(disk)
            health, ask = httpx.get(f"{url}/healthz"), _ask(url)
            filler.unlink()
            again = _ask(url)
        held = before == 200 and health.status_code == 503 and ask.status_code == 503 and again.status_code == 200
        return (
            held,
            f"healthz {before} -> {health.status_code}, ask {ask.status_code} ({ask.json()['error']['type']}), after freeing: {again.status_code}",
        )
    finally:
        subprocess.run(["umount", "--lazy", str(disk)])


def vec_chunk_full(work: Path) -> Outcome:
    import numpy as np

    from kohaku_rag.document.tree import Node, NodeKind
    from kohaku_rag.lake.disk_full import is_disk_full
    from kohaku_rag.stores.vectors import VectorStore, remove_store

    disk = work / "vec_disk"
    if not _mount(disk, "8m"):
        return False, "could not mount a tmpfs (needs root)"
    try:
        lake = disk / "lake"
        (lake / "index").mkdir(parents=True)
        target = lake / "index" / "vectors.0123456789ab.sqlite"
        store = VectorStore(target, 384, model_id="m")
        spare = disk / "spare"
        spare.write_bytes(b"\0" * 3 * 2**20)
        with open(disk / "filler", "wb") as f:
            f.write(b"\0" * (shutil.disk_usage(disk).free - 400_000))
        nodes = [
            Node("d", "d", None, NodeKind.DOCUMENT, 0, "t", "doc"),
            Node("d:sec1", "d", "d", NodeKind.SECTION, 1, "s", "sec"),
            Node("d:sec1:p1", "d", "d:sec1", NodeKind.PARAGRAPH, 1, "", "p"),
            *(Node(f"d:sec1:p1:s{k}", "d", "d:sec1:p1", NodeKind.SENTENCE, k, "", f"s{k}") for k in (1, 2, 3)),
        ]
        vecs = {n.node_id: np.ones(384, np.float32) / np.sqrt(384) for n in nodes}
        try:
            store.upsert_document("d", "1", nodes, vecs)
            return False, "the write did not fail"
        except Exception as exc:  # noqa: BLE001 - what sqlite-vec raises is the point
            store.close()
            remove_store(target)
            spare.unlink()
            chunk = "vector chunk" in str(exc)  # sqlite-vec's words, not SQLite's
            return chunk and is_disk_full(exc, lake), f"{type(exc).__name__}: {exc}"[:90]
    finally:
        subprocess.run(["umount", "--lazy", str(disk)])


# ── rows ─────────────────────────────────────────────────────────────────────


def big_table(work: Path) -> Outcome:
    corpus = write_corpus(work / "rows_corpus")
    rows = "\n".join(f"| site-{i} | {1000 + i} | 1.{i % 97} |" for i in range(10_000))
    (corpus / "sites.md").write_text(f"# Sites\n\n## 1 Usage\n\n| site | liters | PUE |\n|---|---|---|\n{rows}\n")
    lake = work / "rows_lake"
    probe = (
        "import resource, sys, time; from kohaku_assets.cli import main; t = time.perf_counter();"
        "code = main(['index', '--lake', sys.argv[1], '--corpus', sys.argv[2]]);"
        "print('SECONDS', time.perf_counter() - t, 'PEAK_MB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024);"
        "sys.exit(code)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", probe, str(lake), str(corpus)], env=env, capture_output=True, text=True
    )
    tail = done.stdout.strip().splitlines()[-1].split() if done.stdout.strip() else []
    seconds, peak = (float(tail[1]), float(tail[3])) if tail[:1] == ["SECONDS"] else (-1.0, -1.0)
    from kohaku_rag.indexing.steps import tables_cut
    from kohaku_rag.lake.layout import Lake

    cut = tables_cut(Lake(lake), "sites")
    held = done.returncode == 0 and bool(cut)
    return held, f"kohaku index {seconds:.0f} s, peak {peak:,.0f} MB; {'; '.join(cut) or 'NO LINE'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default="", help="scratch folder (default: a temporary one)")
    parser.add_argument("--only", default="", help="comma-separated: tables,index,serve,disk,rows (default: all)")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="kohaku-faults-trust-"))
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    only = set(args.only.split(",")) if args.only else {"tables", "index", "serve", "disk", "rows"}
    started = time.perf_counter()
    results: list[bool] = []
    if "tables" in only:
        results.append(_report("table: count and checksum stripped, half the rows cut", stripped_table(work)))
    if "index" in only:
        results.append(_report("index: vectors rewritten in place, mtime kept", changed_bytes(
            work, "rewritten", lambda lake, _c: rewrite_vectors_in_place(lake / live(lake, "vectors")))))  # fmt: skip
        results.append(_report("index: older generation copied over live, size and mtime kept",
                               changed_bytes(work, "older", _older_over_live)))  # fmt: skip
    with QAServer() as qa:
        if "serve" in only:
            results += [_report(name, outcome) for name, outcome in serve_scenarios(work, qa)]
        if "disk" in only:
            results.append(_report("disk: full while serving", full_disk_serving(work, qa)))
            results.append(_report("disk: sqlite-vec's failed chunk read as a full disk", vec_chunk_full(work)))
    if "rows" in only:
        results.append(_report("rows: a 10,000-row table indexed", big_table(work)))
    print(f"held {sum(results)} / {len(results)} ({time.perf_counter() - started:.0f}s)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
