"""Scaling out and up: workers, search latency at 1x/10x/100x, peak memory, partition counts.

    python bench/indexing/scale.py workers    [--docs 32] [--counts 1,2,4] [--cache-from /tmp/kohaku-bench/lake]
    python bench/indexing/scale.py search     [--scales 1,10,100] [--lake /tmp/kohaku-bench/lake] [--queries 40]
    python bench/indexing/scale.py memory     [--copies 1,2] [--cache-from /tmp/kohaku-bench/lake]
    python bench/indexing/scale.py partitions [--counts 10000,100000] [--no-sensor | --sensor-only]

workers: documents/second of `kohaku index` on the WattBot corpus, in-process (the baseline,
same run) and through 1, 2, 4 Celery workers on a PostgreSQL instance (local servers); the
embedding cache is copied from an indexed lake so the run measures parsing, trees,
propagation and Dagster orchestration, not MiniLM (--cold: no cache).
search: the WattBot paragraph vectors copied (perturbed) to 10x and 100x; ms/query of the exact
sqlite-vec search (the baseline) and of `vector_search = "binary"`, recall@10 of binary
against exact, file size, peak RSS of building and of searching (each in a fresh process).
memory: peak RSS of in-process `kohaku index` at 1x and 2x the corpus (synthetic copies).
partitions: adding, listing and checking N dynamic document partitions on a SQLite instance,
and one `corpus_sensor` tick over N tiny registered, unindexed text documents (its parts timed alone).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import numpy as np

WATTBOT = REPO.parent / "shared" / "wattbot"
BENCH_LAKE = Path("/tmp/kohaku-bench/lake")


def peak_rss_mb() -> float:
    """This process's peak RSS. VmHWM, not ru_maxrss: Linux carries ru_maxrss across exec, so
    a child started by a big parent would report the parent's peak."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child(args: list[str]) -> dict:
    """Run this script's hidden sub-command in a fresh process; its last line is JSON."""
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# ── workers ──────────────────────────────────────────────────────────────────


def _fresh_lake(root: Path, docs: int | None, cache_from: Path | None, copies: int = 1) -> tuple[Path, Path]:
    from kohaku_assets.cluster.demo import prepare_wattbot

    if root.exists():
        shutil.rmtree(root)
    corpus = prepare_wattbot(WATTBOT, root / "corpus", copies=copies, limit=docs)
    if cache_from is not None and (cache_from / "cache").exists():
        shutil.copytree(cache_from / "cache", root / "cache")
    return root, corpus


def bench_workers(args: argparse.Namespace) -> None:
    from kohaku_assets.cluster.servers import local_cluster
    from kohaku_assets.resources import KohakuSettings
    from kohaku_assets.runner import run_index

    cache = None if args.cold else args.cache_from
    work = Path(tempfile.mkdtemp(prefix="kohaku-scale-"))
    results = []
    for workers in [0, *[int(c) for c in args.counts.split(",")]]:
        lake, corpus = _fresh_lake(work / f"lake{workers}", args.docs, cache)
        settings = KohakuSettings(lake_root=str(lake), corpus_dir=str(corpus))
        if workers == 0:
            started = time.perf_counter()
            report = run_index(settings, progress=lambda _m: None)
            seconds = time.perf_counter() - started
        else:
            # Runs in flight: each run waits >= 1 s per step (dagster-celery's polling tick), so
            # several runs per worker keep the workers busy.
            os.environ["KOHAKU_CLUSTER_RUNS"] = str(args.runs or max(2, workers))
            with local_cluster(workers) as _cluster:
                started = time.perf_counter()
                report = run_index(settings, progress=lambda _m: None)
                seconds = time.perf_counter() - started
        if report.failed:
            raise SystemExit(f"indexing failed: {report.failed}")
        docs = len(report.recomputed)
        label = (
            "in-process (baseline)"
            if workers == 0
            else f"{workers} worker(s), {os.environ['KOHAKU_CLUSTER_RUNS']} runs"
        )
        results.append((label, docs, seconds))
        print(f"{label:24s} {docs} documents in {seconds:6.1f} s = {docs / seconds:.2f} documents/s", flush=True)
    base = results[0][2]
    for label, _docs, seconds in results[1:]:
        print(f"  {label}: {base / seconds:.2f}x the in-process rate")
    shutil.rmtree(work, ignore_errors=True)


# ── search at 1x / 10x / 100x ────────────────────────────────────────────────


def _real_vectors(lake: Path) -> np.ndarray:
    import apsw
    import sqlite_vec

    conn = apsw.Connection(
        f"file:{lake / 'index' / 'vectors.sqlite'}?mode=ro", flags=apsw.SQLITE_OPEN_URI | apsw.SQLITE_OPEN_READONLY
    )
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    blobs = [r[0] for r in conn.execute("SELECT embedding FROM vec_paragraph ORDER BY id")]
    conn.close()
    return np.frombuffer(b"".join(blobs), np.float32).reshape(len(blobs), -1)


def _question_vectors(n: int) -> np.ndarray:
    import csv

    from kohaku_rag.indexing.index_config import IndexConfig
    from kohaku_rag.lake.layout import Lake
    from kohaku_rag.model_pool import ModelPool

    with open(WATTBOT / "train_QA.csv", encoding="utf-8") as f:
        questions = [row["question"] for row in csv.DictReader(f)][:n]
    embedder = ModelPool().embedder(IndexConfig().embedder, Lake(Path(tempfile.mkdtemp())))
    return np.asarray(embedder.embed(questions, role="query"), dtype=np.float32)


def build_store(path: Path, scale: int, source_lake: Path, noise: float = 0.2) -> dict:
    """The paragraph vectors x `scale`: copy 0 as is, the others perturbed by noise of norm
    ~`noise` (0.2: cosine ~0.98 to the original, like a re-worded paragraph; much less makes
    near-duplicates whose order is a coin toss for any approximate search); one document per (copy, 100 rows),
    written with the store's own upserts, streamed."""
    from kohaku_rag.document.tree import Node, NodeKind
    from kohaku_rag.stores.vectors import VectorStore

    base = _real_vectors(source_lake)
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    with VectorStore(path, base.shape[1], search="binary") as store:
        for copy in range(scale):
            rows = (
                base
                if copy == 0
                else base + (noise / np.sqrt(base.shape[1])) * rng.standard_normal(base.shape).astype(np.float32)
            )
            for start in range(0, len(rows), 100):
                doc_id = f"c{copy}d{start}"
                part = rows[start : start + 100]
                nodes = [Node(doc_id, doc_id, None, NodeKind.DOCUMENT, 0, doc_id, doc_id)]
                nodes += [
                    Node(f"{doc_id}:p{i}", doc_id, doc_id, NodeKind.PARAGRAPH, i, "", f"paragraph {i}")
                    for i in range(len(part))
                ]
                store.upsert_document(doc_id, "v1", nodes, ([n.node_id for n in nodes[1:]], part))
    return {"rows": len(base) * scale, "build_s": time.perf_counter() - started, "build_rss_mb": peak_rss_mb()}


def search_child(path: Path, mode: str, queries: np.ndarray, k: int) -> dict:
    from kohaku_rag.stores.vectors import VectorStore

    with VectorStore(path, queries.shape[1], search=mode) as store:
        t0 = time.perf_counter()
        store.search(queries[0], ["paragraph"], k=k)  # loads the codes ("binary")
        first = time.perf_counter() - t0
        times, found = [], []
        for q in queries:
            t = time.perf_counter()
            hits = store.search(q, ["paragraph"], k=k)
            times.append(time.perf_counter() - t)
            found.append([h.node_id for h in hits])
    return {
        "median_ms": 1000 * statistics.median(times),
        "p95_ms": 1000 * sorted(times)[int(0.95 * (len(times) - 1))],
        "first_ms": 1000 * first,
        "rss_mb": peak_rss_mb(),
        "found": found,
    }


def bench_search(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="kohaku-scale-search-"))
    np.save(work / "queries.npy", _question_vectors(args.queries))
    print(
        f"{'scale':>5} {'rows':>8} {'size MB':>8} {'build s':>8} {'build RSS':>9} | "
        f"{'exact ms (p95)':>15} {'RSS':>6} | {'binary ms (p95)':>16} {'RSS':>6} {'load ms':>8} {'recall@10':>9}"
    )
    for scale in [int(s) for s in args.scales.split(",")]:
        path = work / f"v{scale}.sqlite"
        built = _child(["_build", str(path), str(scale), str(args.lake), str(args.noise)])
        size = sum(p.stat().st_size for p in work.glob(f"v{scale}.sqlite*")) / 1e6
        # Both modes on the same file, each in a fresh process; exact first (the baseline).
        exact = _child(["_search", str(path), "exact", str(work / "queries.npy")])
        binary = _child(["_search", str(path), "binary", str(work / "queries.npy")])
        recall = statistics.mean(len(set(b) & set(e)) / len(e) for b, e in zip(binary["found"], exact["found"]))
        print(
            f"{scale:>4}x {built['rows']:>8} {size:>8.0f} {built['build_s']:>8.1f} {built['build_rss_mb']:>7.0f}MB | "
            f"{exact['median_ms']:>7.1f} ({exact['p95_ms']:>5.1f}) {exact['rss_mb']:>4.0f}MB | "
            f"{binary['median_ms']:>8.1f} ({binary['p95_ms']:>5.1f}) {binary['rss_mb']:>4.0f}MB {binary['first_ms']:>8.0f} "
            f"{recall:>9.3f}",
            flush=True,
        )
        for p in work.glob(f"v{scale}.sqlite*"):
            p.unlink()
    shutil.rmtree(work, ignore_errors=True)


# ── memory of indexing ───────────────────────────────────────────────────────


def index_child(copies: int, cache_from: Path) -> dict:
    from kohaku_assets.resources import KohakuSettings
    from kohaku_assets.runner import run_index

    lake, corpus = _fresh_lake(Path(tempfile.mkdtemp(prefix="kohaku-mem-")) / "lake", None, cache_from, copies)
    started = time.perf_counter()
    report = run_index(KohakuSettings(lake_root=str(lake), corpus_dir=str(corpus)), progress=lambda _m: None)
    out = {"documents": report.documents, "seconds": time.perf_counter() - started, "rss_mb": peak_rss_mb()}
    shutil.rmtree(lake.parent, ignore_errors=True)
    return out


def bench_memory(args: argparse.Namespace) -> None:
    for copies in [int(c) for c in args.copies.split(",")]:
        got = _child(["_index", str(copies), str(args.cache_from)])
        print(
            f"{copies}x: {got['documents']} documents indexed in-process in {got['seconds']:.0f} s, peak RSS {got['rss_mb']:.0f} MB",
            flush=True,
        )


# ── dynamic partitions ───────────────────────────────────────────────────────


def partitions_child(count: int) -> dict:
    from dagster import DagsterInstance

    from kohaku_assets.partitions import DOCUMENTS

    home = Path(tempfile.mkdtemp(prefix="kohaku-parts-"))
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    instance = DagsterInstance.from_config(str(home))
    keys = [f"doc{i:06d}" for i in range(count)]
    t0 = time.perf_counter()
    for start in range(0, count, 1000):
        instance.add_dynamic_partitions(DOCUMENTS, keys[start : start + 1000])
    added = time.perf_counter() - t0
    t0 = time.perf_counter()
    listed = instance.get_dynamic_partitions(DOCUMENTS)
    listing = time.perf_counter() - t0
    # What `kohaku index` does per document before planning (runner._register): one check each.
    t0 = time.perf_counter()
    for key in keys[:2000]:
        instance.has_dynamic_partition(DOCUMENTS, key)
    per_check = (time.perf_counter() - t0) / 2000
    # Dagster's partition status cache for one asset over every key (what the UI's partition page reads).
    from dagster import AssetKey
    from dagster._core.storage.partition_status_cache import get_and_update_asset_status_cache_value

    t0 = time.perf_counter()
    try:
        from kohaku_assets.definitions import defs

        graph = defs.resolve_asset_graph()
        get_and_update_asset_status_cache_value(
            instance, AssetKey("index_rows"), graph.get(AssetKey("index_rows")).partitions_def
        )
        status = f"{time.perf_counter() - t0:.2f} s"
    except Exception as exc:  # the point of measuring: report what breaks
        status = f"failed: {type(exc).__name__}: {str(exc)[:120]}"
    shutil.rmtree(home, ignore_errors=True)
    return {
        "count": len(listed),
        "add_s": added,
        "list_s": listing,
        "check_ms": 1000 * per_check,
        "status": status,
        "rss_mb": peak_rss_mb(),
    }


def sensor_child(count: int, full_tick: bool = True) -> dict:
    """One `corpus_sensor` tick over `count` tiny text documents whose partitions are
    registered but not indexed, then its parts timed alone: listing the partitions, scanning
    (hashing) the folder, planning, and Dagster's run-key look-ups (one `get_runs` each, timed
    on 2,000 keys). Without `full_tick` the tick itself is not run (tick_s is None)."""
    from dagster import build_sensor_context

    from kohaku_assets.instance import instance_for
    from kohaku_assets.partitions import DOCUMENTS
    from kohaku_assets.resources import KohakuSettings
    from kohaku_assets.runner import resources_for
    from kohaku_assets.sensors import _run_keys_used, _runs_in_flight, corpus_sensor
    from kohaku_rag.indexing.corpus import scan_corpus
    from kohaku_rag.indexing.index_plan import plan_index

    root = Path(tempfile.mkdtemp(prefix="kohaku-sensor-"))
    corpus = root / "corpus"
    corpus.mkdir()
    keys = [f"doc_{i:06d}" for i in range(count)]
    t0 = time.perf_counter()
    for i, key in enumerate(keys):
        (corpus / f"{key}.txt").write_text(f"Document {i} reports a PUE of 1.{i % 100:02d}.\n", encoding="utf-8")
    write_s = time.perf_counter() - t0
    settings = KohakuSettings(lake_root=str(root / "lake"), corpus_dir=str(corpus))
    instance = instance_for(settings.lake.root)
    for start in range(0, count, 1000):
        instance.add_dynamic_partitions(DOCUMENTS, keys[start : start + 1000])
    context = build_sensor_context(resources=resources_for(settings), instance=instance)
    tick_s, runs = None, None
    if full_tick:
        t0 = time.perf_counter()
        tick = corpus_sensor(context)
        tick_s = time.perf_counter() - t0
        runs = len(getattr(tick, "run_requests", None) or [])
    # The parts, each alone (the tick's own order).
    t0 = time.perf_counter()
    registered = set(instance.get_dynamic_partitions(DOCUMENTS))
    list_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    scan = scan_corpus(settings.corpus, settings.lake.sources_dir, follow_links=settings.follow_links)
    scan_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    plan = plan_index(scan, settings.lake, settings.index_config(), registered)
    plan_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    _runs_in_flight(context)
    in_flight_s = time.perf_counter() - t0
    sample = plan.build[:2000]
    t0 = time.perf_counter()
    _run_keys_used(context, [f"{doc_id}:x" for doc_id in sample])  # batched, as the sensor does
    run_key_ms = 1000 * (time.perf_counter() - t0) / max(1, len(sample))
    shutil.rmtree(root, ignore_errors=True)
    return {
        "count": count,
        "write_s": write_s,
        "tick_s": tick_s,
        "runs": runs,
        "list_s": list_s,
        "scan_s": scan_s,
        "plan_s": plan_s,
        "in_flight_s": in_flight_s,
        "run_key_ms": run_key_ms,
        "build": len(plan.build),
        "rss_mb": peak_rss_mb(),
    }


def bench_partitions(args: argparse.Namespace) -> None:
    for count in [] if args.sensor_only else [int(c) for c in args.counts.split(",")]:
        got = _child(["_partitions", str(count)])
        print(
            f"{got['count']:>7} partitions (SQLite instance): add {got['add_s']:.1f} s, list {got['list_s'] * 1000:.0f} ms, "
            f"has_dynamic_partition {got['check_ms']:.2f} ms each (x{got['count']} = {got['check_ms'] * got['count'] / 1000:.0f} s: "
            f"`kohaku index` registering one key at a time, before runner._register listed them once), partition status of index_rows: {got['status']}, RSS {got['rss_mb']:.0f} MB",
            flush=True,
        )
    if args.no_sensor:
        return
    for count in [int(c) for c in args.counts.split(",")]:
        got = _child(["_sensor", str(count), "1" if count <= args.full_tick_max else "0"])
        n, runs = got["count"], got["build"]
        parts = got["list_s"] + got["scan_s"] + got["plan_s"] + got["in_flight_s"] + got["run_key_ms"] * runs / 1000
        tick = (
            f"{got['tick_s']:.1f} s, {got['runs']} run requests"
            if got["tick_s"] is not None
            else f"not run (> --full-tick-max), ~{parts:.0f} s from its parts, {runs} run requests"
        )
        print(
            f"{n:>7} documents, corpus_sensor first tick (registered, none indexed): {tick}; alone: list partitions {got['list_s']:.2f} s, scan+hash folder "
            f"{got['scan_s']:.1f} s, plan_index {got['plan_s']:.1f} s, runs in flight {got['in_flight_s'] * 1000:.0f} ms, "
            f"run-key lookup (batches of 500) {got['run_key_ms']:.3f} ms per key (x{runs} = {got['run_key_ms'] * runs / 1000:.0f} s), "
            f"RSS {got['rss_mb']:.0f} MB (writing the files: {got['write_s']:.0f} s)",
            flush=True,
        )


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1].startswith("_"):  # hidden sub-commands run in a fresh process
        cmd, rest = sys.argv[1], sys.argv[2:]
        if cmd == "_build":
            out = build_store(Path(rest[0]), int(rest[1]), Path(rest[2]), float(rest[3]))
        elif cmd == "_search":
            out = search_child(Path(rest[0]), rest[1], np.load(rest[2]), 10)
        elif cmd == "_index":
            out = index_child(int(rest[0]), Path(rest[1]))
        elif cmd == "_sensor":
            out = sensor_child(int(rest[0]), rest[1:] != ["0"])
        else:
            out = partitions_child(int(rest[0]))
        print(json.dumps(out))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    w = sub.add_parser("workers")
    w.add_argument("--docs", type=int, default=32)
    w.add_argument("--counts", default="1,2,4")
    w.add_argument("--cache-from", type=Path, default=BENCH_LAKE)
    w.add_argument("--cold", action="store_true")
    w.add_argument("--runs", type=int, default=0, help="document runs in flight (default: max(2, workers))")
    s = sub.add_parser("search")
    s.add_argument("--scales", default="1,10,100")
    s.add_argument("--lake", type=Path, default=BENCH_LAKE)
    s.add_argument("--queries", type=int, default=40)
    s.add_argument("--noise", type=float, default=0.2, help="norm of the perturbation of each synthetic copy")
    m = sub.add_parser("memory")
    m.add_argument("--copies", default="1,2")
    m.add_argument("--cache-from", type=Path, default=BENCH_LAKE)
    p = sub.add_parser("partitions")
    p.add_argument("--counts", default="10000,100000")
    p.add_argument("--no-sensor", action="store_true", help="skip the corpus sensor's tick")
    p.add_argument("--sensor-only", action="store_true", help="only the corpus sensor's tick")
    p.add_argument(
        "--full-tick-max",
        type=int,
        default=20000,
        help="run the whole sensor tick up to this many documents; above it, only its parts (the tick summed from them)",
    )
    args = parser.parse_args()
    {"workers": bench_workers, "search": bench_search, "memory": bench_memory, "partitions": bench_partitions}[
        args.what
    ](args)


if __name__ == "__main__":
    main()
