"""What reading the live index generation against its checksums costs, at the WattBot
corpus (32 documents) and at 100x (3,200: every document's stored rows copied under new
ids and assembled into one generation, no re-embedding).

    python bench/indexing/verify_cost.py [--wattbot DIR] [--work DIR] [--scales 1,100]

Prints, per scale: the index files' size, the cheap check every `kohaku index` made before
(`indexes_behind`: sizes, counts), the checksum read it now makes first
(`index_health.verify_published`, also what `kohaku serve` runs at start and on its
schedule), and a whole no-op `kohaku index` at 1x, in seconds (median of --repeats).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from kohaku_assets.cluster.demo import prepare_wattbot  # noqa: E402
from kohaku_assets.resources import KohakuSettings  # noqa: E402
from kohaku_assets.runner import run_index  # noqa: E402
from kohaku_rag.indexing import assembly, search_aids  # noqa: E402
from kohaku_rag.indexing import steps as ix  # noqa: E402
from kohaku_rag.indexing.index_health import indexes_behind, verify_published  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402
from kohaku_rag.lake.manifest import read_manifest  # noqa: E402
from kohaku_rag.lake.tables import write_parquet_atomic  # noqa: E402

WATTBOT = next((p for p in (REPO.parent / "shared" / "wattbot", Path("/work/shared/wattbot")) if p.is_dir()), Path())
COPIED = (ix.SOURCES, ix.INDEX_ROWS)


def build_unit(work: Path, wattbot: Path) -> tuple[Path, Path]:
    """The WattBot corpus indexed (kept between runs in --work)."""
    lake, corpus = work / "lake_1x", work / "corpus_1x"
    if not (lake / "index" / "manifest.json").exists():
        prepare_wattbot(wattbot, corpus)
        os.environ["DAGSTER_HOME"] = str(lake / ".dagster")
        report = run_index(KohakuSettings(lake_root=str(lake), corpus_dir=str(corpus)), progress=lambda _m: None)
        assert not report.failed, report.failed
    return lake, corpus


def _renamed(table, old: str, new: str):  # noqa: ANN001, ANN202 - pyarrow tables
    for name in ("doc_id", "node_id", "parent_id"):
        if name in table.column_names:
            column = pc.replace_substring_regex(table.column(name), pattern=f"^{old}($|:)", replacement=new + r"\1")
            table = table.set_column(table.column_names.index(name), name, column)
    return table


def build_scaled(unit: Path, work: Path, scale: int) -> Path:
    """`scale` copies of every document's source and index rows (written as the lake writes
    tables, so they prove what they hold), assembled into one generation."""
    lake = work / f"lake_{scale}x"
    if (lake / "index" / "manifest.json").exists():
        return lake
    shutil.rmtree(lake, ignore_errors=True)
    shutil.copyfile(unit / "index_config.json", (lake.mkdir(parents=True) or lake) / "index_config.json")
    docs = Lake(unit).partitions(ix.INDEX_ROWS)
    for doc in docs:
        for asset in COPIED:
            table = pq.read_table(Lake(unit).table(asset, doc))
            meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items() if b"kohaku_version" in k}
            for k in range(scale):
                new = doc if k == 0 else f"{doc}-c{k}"
                write_parquet_atomic(
                    _renamed(table, doc, new).replace_schema_metadata(None), Lake(lake).table(asset, new), meta
                )
    keep = Lake(lake).partitions(ix.INDEX_ROWS)
    vectors = read_manifest(unit / "index").parts["vectors"].record
    assembly.assemble_vector_index(Lake(lake), keep, int(vectors["dim"]), vectors["model_id"])
    assembly.assemble_bm25(Lake(lake), keep)
    search_aids.assemble_search_aids(Lake(lake), keep, None)
    return lake


def median_seconds(fn, repeats: int) -> float:  # noqa: ANN001
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wattbot", type=Path, default=WATTBOT)
    parser.add_argument("--work", type=Path, default=Path("/tmp/kohaku-bench/verify-cost"))
    parser.add_argument("--scales", default="1,100")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    unit, corpus = build_unit(args.work, args.wattbot)
    print("| documents | index files | cheap check (before) | checksum read (added) | no-op `kohaku index` |")
    print("|---|---|---|---|---|")
    for scale in (int(s) for s in args.scales.split(",")):
        lake = unit if scale == 1 else build_scaled(unit, args.work, scale)
        docs = Lake(lake).partitions(ix.INDEX_ROWS)
        size = sum(p.stat().st_size for p in (lake / "index").iterdir() if p.is_file())
        cheap = median_seconds(lambda: indexes_behind(Lake(lake), docs), args.repeats)  # noqa: B023
        found = verify_published(Lake(lake))
        assert not found, found
        read = median_seconds(lambda: verify_published(Lake(lake)), args.repeats)  # noqa: B023
        noop = "-"
        if scale == 1:
            settings = KohakuSettings(lake_root=str(lake), corpus_dir=str(corpus))
            os.environ["DAGSTER_HOME"] = str(lake / ".dagster")
            noop = f"{median_seconds(lambda: run_index(settings, progress=lambda _m: None), args.repeats):.2f} s"  # noqa: B023
        print(f"| {len(docs):,} | {size / 2**20:,.1f} MB | {cheap:.3f} s | {read:.3f} s | {noop} |")


if __name__ == "__main__":
    main()
