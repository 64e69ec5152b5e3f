"""What cold indexing of a WattBot-2026-size corpus (122 PDFs) costs, from the PDFs at hand.

    python bench/indexing/index_2026.py [--pdfs ../shared/pdfs] [--work /tmp/kohaku-bench-2026] [--copies 4]

The machine has no internet, so the 2026 PDFs cannot be fetched; the shared real PDFs
(two arXiv papers and a slide deck, 55 pages) stand in. Two measurements, each in a fresh lake:

1. cold: the distinct PDFs once, with an empty embedding cache: seconds per document and
   per page for parsing, figure/table captions (OCR), embedding every sentence and assembly;
2. repeated: the same PDFs copied `--copies` times under new ids, the cold run's embedding
   cache copied in (a copy repeats its sentences, so only the first copy of each would embed):
   how the rest (parsing, captions, Dagster runs, index assembly) grows with the count.

The projection to 122 documents is the cold seconds (wall, and CPU: the honest figure when
other jobs share the cores) per page times the pages of 122 documents, for 12-25 pages per
document (an arXiv paper runs 10-30 pages; the 2026 list's real mean is not known here) and
at the measured mean.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import time
from pathlib import Path

import pymupdf

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # runs from a checkout, uninstalled

from kohaku_assets.resources import KohakuSettings  # noqa: E402
from kohaku_assets.runner import run_index  # noqa: E402
from kohaku_rag.indexing.corpus import read_metadata  # noqa: E402

TARGET_DOCUMENTS = 122


def make_corpus(pdfs: list[Path], dest: Path, copies: int) -> tuple[Path, int]:
    """The PDFs copied `copies` times under new ids; (folder, total pages)."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    pages = 0
    for copy in range(copies):
        for pdf in pdfs:
            stem = pdf.stem.split("_")[0] + ("" if copy == 0 else f"c{copy}")
            shutil.copyfile(pdf, dest / f"{stem}.pdf")
            with pymupdf.open(pdf) as doc:
                pages += doc.page_count
    return dest, pages


def cpu_seconds() -> float:
    """CPU time of this process and its finished children: honest when other jobs share the cores."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def index_once(corpus: Path, lake: Path, cache_from: Path | None = None) -> tuple[float, float, dict[str, object]]:
    """(wall seconds, CPU seconds, the index report) of a fresh lake."""
    shutil.rmtree(lake, ignore_errors=True)
    if cache_from is not None:
        shutil.copytree(cache_from, lake / "cache")
    started, cpu = time.perf_counter(), cpu_seconds()
    report = run_index(KohakuSettings(lake_root=str(lake), corpus_dir=str(corpus)), progress=lambda _m: None)
    seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu
    if report.failed:
        raise SystemExit(f"indexing failed: {report.failed}")
    return seconds, cpu, report.as_dict()


def report_metadata(path: Path) -> None:
    """The real 2026 metadata.csv (UTF-8 with BOM, CRLF, the 2026 columns) as `kohaku index`
    reads it: documents, papers, URLs kept as listed (version pins included)."""
    if not path.exists():
        print(f"metadata: {path} not found (give --metadata)")
        return
    meta = read_metadata(path.parent)
    papers = sum(m.extra.get("type") == "paper" for m in meta.values())
    pinned = sum(m.url.rstrip("/").rsplit("/", 1)[-1].rpartition("v")[2].isdigit() for m in meta.values())
    web = sum(m.url.startswith("http") for m in meta.values())
    print(f"metadata: {len(meta)} documents ({papers} papers), {web} with an http(s) URL, {pinned} version-pinned")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    repo = Path(__file__).resolve().parents[2]
    parser.add_argument("--pdfs", type=Path, default=repo.parent / "shared" / "pdfs")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kohaku-bench-2026"))
    parser.add_argument("--copies", type=int, default=4, help="copies of the PDFs in the repeated run (0: skip it)")
    parser.add_argument("--metadata", type=Path, default=repo.parent / "shared" / "wattbot2026" / "metadata.csv")
    args = parser.parse_args()
    report_metadata(args.metadata)
    pdfs = sorted(args.pdfs.glob("*.pdf"))
    if not pdfs:
        raise SystemExit(f"no PDFs in {args.pdfs}")

    corpus, pages = make_corpus(pdfs, args.work / "corpus1", 1)
    cold, cpu, summary = index_once(corpus, args.work / "lake1")
    per_doc, per_page = cold / len(pdfs), cold / pages
    print(f"cold: {len(pdfs)} PDFs, {pages} pages, nodes {summary['nodes']}: {cold:.1f} s wall, {cpu:.1f} s CPU "
          f"({per_doc:.1f} s/document, {per_page:.2f} s/page wall; load average {os.getloadavg()[0]:.1f})")  # fmt: skip
    for what, seconds in (("wall", cold), ("CPU", cpu)):
        low, high = (TARGET_DOCUMENTS * n * seconds / pages / 60 for n in (12, 25))
        at = TARGET_DOCUMENTS * seconds / len(pdfs) / 60
        print(f"projected cold {what}, {TARGET_DOCUMENTS} documents of 12-25 pages: {low:.0f}-{high:.0f} min "
              f"(at {pages / len(pdfs):.0f} pages/document as measured: {at:.0f} min)")  # fmt: skip

    if args.copies > 0:
        corpus, pages_n = make_corpus(pdfs, args.work / f"corpus{args.copies}x", args.copies)
        seconds, cpu, summary = index_once(corpus, args.work / f"lake{args.copies}x", args.work / "lake1" / "cache")
        n = len(pdfs) * args.copies
        print(f"repeated {args.copies}x: {n} PDFs, {pages_n} pages, embedding cache warm: {seconds:.1f} s wall, "
              f"{cpu:.1f} s CPU "
              f"({seconds / n:.1f} s/document; {100 * seconds / n / per_doc:.0f}% of a cold document)")  # fmt: skip


if __name__ == "__main__":
    main()
