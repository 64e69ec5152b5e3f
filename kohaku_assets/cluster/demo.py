"""`make cluster-demo`: a corpus indexed by Celery workers on a PostgreSQL instance.

    python -m kohaku_assets.cluster.demo [--wattbot DIR] [--lake data_lake/cluster_demo]
                                         [--workers 2] [--limit N]

The corpus is the bundled sample corpus, or with `--wattbot DIR` the WattBot JSON payloads of
DIR/corpus_json and DIR/metadata.csv (the download of docs/how-to/wattbot-2025.md).

Starts PostgreSQL, Redis and the workers as local processes (kohaku_assets.cluster.servers),
runs `kohaku index` through them, searches the result, and stops everything it started. The
PostgreSQL server is throwaway: the lake keeps its index, and a later `kohaku index` without
KOHAKU_DAGSTER_PG goes back to the embedded SQLite instance (the run history stays behind).
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import sys
import time
from pathlib import Path

import kohaku_rag as kr
from kohaku_assets.cluster.servers import local_cluster, missing_servers
from kohaku_assets.resources import REPO_ROOT, KohakuSettings
from kohaku_assets.runner import run_index
from kohaku_rag.samples import write_sample_corpus

__all__ = ["demo_corpus", "main", "prepare_wattbot"]


def prepare_wattbot(wattbot: Path, dest: Path, *, copies: int = 1, limit: int | None = None) -> Path:
    """A corpus folder of the WattBot JSON payloads and their metadata.csv (ids suffixed
    `-cN` for the N-th synthetic copy); `limit` keeps the first documents only."""
    sources = sorted((wattbot / "corpus_json").glob("*.json"))[:limit]
    if not sources:
        raise SystemExit(f"{wattbot / 'corpus_json'}: no WattBot JSON documents found")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    keep = {p.stem for p in sources}
    meta = (wattbot / "metadata.csv").read_text(encoding="utf-8").splitlines()
    out = [meta[0]]
    for copy in range(copies):
        suffix = "" if copy == 0 else f"-c{copy}"
        for src in sources:
            shutil.copyfile(src, dest / f"{src.stem}{suffix}.json")
        out += [f"{d}{suffix},{rest}" for d, rest in (ln.split(",", 1) for ln in meta[1:]) if d in keep]
    (dest / "metadata.csv").write_text("\n".join(out) + "\n", encoding="utf-8")
    return dest


def demo_corpus(wattbot: Path | None, dest: Path, *, limit: int | None = None) -> Path:
    """The corpus the demo indexes: the WattBot folder's, else the bundled sample corpus."""
    if wattbot is not None:
        return prepare_wattbot(wattbot, dest, limit=limit)
    if dest.exists():
        shutil.rmtree(dest)
    write_sample_corpus(dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # No default beside the clone: a user's clone has no ../shared; the bundled
    # sample corpus is what every install has.
    parser.add_argument("--wattbot", type=Path, default=None, help="a WattBot folder (default: the sample corpus)")
    parser.add_argument("--lake", type=Path, default=REPO_ROOT / "data_lake" / "cluster_demo")
    parser.add_argument("--workers", type=int, default=2, help="Celery worker processes (default 2)")
    parser.add_argument("--limit", type=int, default=None, help="index only the first N documents")
    args = parser.parse_args(argv)
    # A SIGTERM (a CI timeout, kill) unwinds like Ctrl-C, so the servers are stopped.
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))
    missing = missing_servers()
    if missing:
        print("cannot start the cluster, missing: " + "; ".join(missing), file=sys.stderr)
        return 2
    corpus = demo_corpus(args.wattbot, args.lake / "corpus", limit=args.limit)
    settings = KohakuSettings(lake_root=str(args.lake), corpus_dir=str(corpus))
    print(f"starting PostgreSQL, Redis and {args.workers} Celery workers ...", flush=True)
    with local_cluster(args.workers) as cluster:
        print(f"cluster up (workers pid {cluster.worker_pids}); indexing {corpus}", flush=True)
        started = time.perf_counter()
        report = run_index(settings, progress=lambda line: print(line, flush=True))
        seconds = time.perf_counter() - started
        print(json.dumps(report.as_dict() | {"workers": args.workers, "seconds": round(seconds, 1)}))
    print("stopped PostgreSQL, Redis and the workers")
    # The index is read without the cluster: it is the lake's files.
    hits = kr.open(args.lake).search("What is the PUE of the data center?", budget_chars=600)
    for hit in hits[:3]:
        print(f"  {hit.node_id} (p. {hit.page}): {hit.text[:100]!r}")
    return 1 if report.failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
