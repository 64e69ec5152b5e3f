"""What the index checks cost: a no-op `kohaku index` and the first search of a fresh process
at 1x, 10x and 100x the WattBot corpus, for this checkout and a baseline checkout in one run.

    python bench/indexing/index_overhead.py --unit-lake /tmp/kb/lake1 --unit-corpus /tmp/kb/corpus1 \\
        --baseline /tmp/base [--scales 1,10,100] [--runs 3] [--work /tmp/kb/overhead]

The unit is a lake indexed from the WattBot text corpus without metadata.csv (so a copy of a
file has the same content hash as the original). Nx is made by copying every document's
files and per-document tables N times under new ids (`<doc>__cK`, every id inside the
tables renamed), so no document is parsed or embedded again; each checkout then assembles
its own index from those tables with one `kohaku index`, and is timed: the median of
`--runs` no-op `kohaku index` runs (each a fresh process: what a user waits for), and the
first search of a fresh process (`kohaku search`, open + one query), both as wall seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[2]
TABLES = ("source_document", "document_tree", "captions", "leaf_embeddings", "node_embeddings", "index_rows")
ID_COLUMNS = ("doc_id", "node_id", "parent_id")
QUESTION = "What is the estimated water consumption of training GPT-3?"


def _renamed(table: pa.Table, old: str, new: str) -> pa.Table:
    """Every id column with the document's id prefix replaced (`old:...` -> `new:...`)."""
    for name in ID_COLUMNS:
        if name in table.column_names:
            column = table.column(name)
            renamed = pc.replace_substring_regex(column, pattern=f"^{re.escape(old)}($|:)", replacement=new + r"\1")
            table = table.set_column(table.column_names.index(name), name, renamed)
    return table


def synthesize(unit_lake: Path, unit_corpus: Path, scale: int, work: Path) -> tuple[Path, Path]:
    """A lake's per-document tables and a corpus at `scale` times the unit (no index)."""
    lake, corpus = work / f"tables_{scale}x", work / f"corpus_{scale}x"
    if lake.exists():
        return lake, corpus
    corpus.mkdir(parents=True)
    docs = sorted(p.stem for p in (unit_lake / "index_rows").glob("*.parquet"))
    for doc in docs:
        source = next(unit_corpus.glob(f"{doc}.*"))
        for k in range(scale):
            new = doc if k == 0 else f"{doc}__c{k}"
            shutil.copyfile(source, corpus / f"{new}{source.suffix}")
            for asset in TABLES:
                path = unit_lake / asset / f"{doc}.parquet"
                if not path.exists():
                    continue
                table = pq.read_table(path)
                if asset == "source_document":
                    table = table.set_column(
                        table.column_names.index("path"), "path", pa.array([str(corpus / f"{new}{source.suffix}")])
                    )
                target = lake / asset / f"{new}.parquet"
                target.parent.mkdir(parents=True, exist_ok=True)
                pq.write_table(_renamed(table, doc, new), target, compression="zstd")
    for name in ("index_config.json",):
        if (unit_lake / name).exists():
            shutil.copyfile(unit_lake / name, lake / name)
    blobs = unit_lake / "blobs"
    if blobs.exists():
        shutil.copytree(blobs, lake / "blobs")
    return lake, corpus


def kohaku(checkout: Path, *args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    code = "import sys; from kohaku_assets.cli import main; sys.exit(main())"
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, cwd=checkout)
    return time.perf_counter() - t0, done


def measure(checkout: Path, tables: Path, corpus: Path, work: Path, runs: int) -> dict[str, float]:
    lake = work / f"lake_{checkout.name}_{tables.name}"
    shutil.rmtree(lake, ignore_errors=True)
    shutil.copytree(tables, lake)
    where = ["--lake", str(lake), "--corpus", str(corpus)]
    assemble, done = kohaku(checkout, "index", *where)
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: the assembling run failed: {done.stderr[-1500:]}")
    noop = []
    for _ in range(runs):
        seconds, done = kohaku(checkout, "index", *where, "--json")
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        if done.returncode != 0 or summary.get("recomputed"):
            raise SystemExit(f"{checkout}: the no-op run was not a no-op: {done.stdout[-800:]}{done.stderr[-800:]}")
        noop.append(seconds)
    first = []
    for _ in range(runs):
        seconds, done = kohaku(checkout, "search", QUESTION, *where)
        if done.returncode != 0:
            raise SystemExit(f"{checkout}: search failed: {done.stderr[-800:]}")
        first.append(seconds)
    shutil.rmtree(lake, ignore_errors=True)
    return {"assemble_s": assemble, "noop_index_s": statistics.median(noop), "first_search_s": statistics.median(first)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unit-lake", type=Path, required=True)
    parser.add_argument("--unit-corpus", type=Path, required=True)
    parser.add_argument("--baseline", type=Path, required=True, help="a checkout of the code to compare with")
    parser.add_argument("--scales", default="1,10,100")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work", type=Path, default=Path("/tmp/kb/overhead"))
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    for scale in (int(s) for s in args.scales.split(",")):
        tables, corpus = synthesize(args.unit_lake, args.unit_corpus, scale, args.work)
        docs = len(list((tables / "index_rows").glob("*.parquet")))
        rows = {}
        for name, checkout in (("baseline", args.baseline), ("this", REPO)):
            rows[name] = measure(checkout, tables, corpus, args.work, args.runs)
        b, t = rows["baseline"], rows["this"]
        print(
            f"{scale:4d}x ({docs} docs): no-op index {b['noop_index_s']:.2f}s -> {t['noop_index_s']:.2f}s "
            f"({100 * (t['noop_index_s'] / b['noop_index_s'] - 1):+.1f}%), first search {b['first_search_s']:.2f}s -> "
            f"{t['first_search_s']:.2f}s ({100 * (t['first_search_s'] / b['first_search_s'] - 1):+.1f}%), "
            f"assembly {b['assemble_s']:.1f}s -> {t['assemble_s']:.1f}s; load {os.getloadavg()[0]:.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
