"""Indexing cost and retrieval quality on the WattBot corpus, against a flat BM25 baseline.

    python bench/indexing/index_wattbot.py [--wattbot ../shared/wattbot] [--work /tmp/kohaku-bench] [--no-scale]

Prints: cold index seconds; re-index seconds after nothing changed and after one document
changed (ratios to cold); gold-document Recall@1/5, MRR and evidence recall at 4,000 and
8,000 context characters for `kohaku search` and for flat BM25 over 800-character chunks;
then a 10x scale run (320 documents): index seconds, peak memory, search latency.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # runs from a checkout, uninstalled

from bench.retrieval.retrieval_eval import evaluate, load_gold  # noqa: E402
from kohaku_assets.resources import KohakuSettings  # noqa: E402
from kohaku_assets.runner import run_index  # noqa: E402
from kohaku_rag.parse.payload import IMAGE_PLACEHOLDER  # noqa: E402
from kohaku_rag.retrieval.context import ContextItem  # noqa: E402
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig  # noqa: E402
from kohaku_rag.retrieval.retriever import open_retriever  # noqa: E402
from kohaku_rag.stores.bm25 import BM25Index, flat_chunks, tokenize  # noqa: E402

BUDGETS = (4000, 8000)
REPO = Path(__file__).resolve().parents[2]


def make_corpus(wattbot: Path, dest: Path, copies: int = 1) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    meta_lines = (wattbot / "metadata.csv").read_text(encoding="utf-8").splitlines()
    out_meta = [meta_lines[0]]
    for copy in range(copies):
        suffix = "" if copy == 0 else f"-c{copy}"
        for src in sorted((wattbot / "corpus_json").glob("*.json")):
            shutil.copyfile(src, dest / f"{src.stem}{suffix}.json")
        for line in meta_lines[1:]:
            doc_id, rest = line.split(",", 1)
            out_meta.append(f"{doc_id}{suffix},{rest}")
    (dest / "metadata.csv").write_text("\n".join(out_meta) + "\n", encoding="utf-8")
    return dest


def timed_index(settings: KohakuSettings) -> tuple[float, dict]:
    started = time.perf_counter()
    report = run_index(settings, progress=lambda _m: None)
    if report.failed:
        raise SystemExit(f"indexing failed: {report.failed}")
    return time.perf_counter() - started, report.as_dict()


def flat_baseline(wattbot: Path) -> tuple[BM25Index, dict[str, str]]:
    rows, texts = [], {}
    for path in sorted((wattbot / "text").glob("*.txt")):
        text = "\n".join(ln for ln in path.read_text(encoding="utf-8").splitlines() if not IMAGE_PLACEHOLDER.match(ln))
        for i, chunk in enumerate(flat_chunks(text, size=800)):
            node_id = f"{path.stem}:chunk{i}"
            rows.append((node_id, path.stem, tokenize(chunk)))
            texts[node_id] = chunk
    return BM25Index.build(rows), texts


def change_one_document(corpus: Path, doc_id: str) -> None:
    path = corpus / f"{doc_id}.json"
    payload = json.loads(path.read_text(encoding="utf-8"))
    payload["sections"][-1]["paragraphs"].append(
        {"text": "Erratum added for the benchmark: the reported totals exclude idle power.", "metadata": {}}
    )
    path.write_text(json.dumps(payload), encoding="utf-8")


def scale_run(wattbot: Path, work: Path, questions: list, copies: int) -> tuple[float, float]:
    """Index the corpus copied `copies` times under new ids in a fresh lake (subprocess, for
    its peak memory); returns (seconds, search seconds per query)."""
    corpus = make_corpus(wattbot, work / f"corpus{copies}x", copies=copies)
    lake = work / f"lake{copies}x"
    shutil.rmtree(lake, ignore_errors=True)
    # Reuse the cold run's embedding cache: the copies repeat the same sentences, so this
    # measures parsing, propagation, Dagster runs and index assembly as the corpus grows
    # (embedding itself is linear per sentence: see the cold run).
    shutil.copytree(work / "lake" / "cache", lake / "cache")
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "kohaku_assets.cli", "index", "--corpus", str(corpus), "--lake", str(lake), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"scale run failed:\n{proc.stderr[-3000:]}")
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # max over children so far
    settings = KohakuSettings(lake_root=str(lake), corpus_dir=str(corpus))
    retriever = open_retriever(settings.lake, settings.index_config())
    cfg = RetrievalConfig()
    retriever.search(["warm-up"], cfg)
    t0 = time.perf_counter()
    for q in questions:
        retriever.search([q.question], cfg)
    latency = (time.perf_counter() - t0) / len(questions)
    print(f"scale {copies}x: {summary['documents']} documents, nodes {summary['nodes']}")
    print(
        f"scale {copies}x: index {seconds:.1f}s ({seconds / summary['documents']:.2f} s/document, embedding cache warm), "
        f"peak RSS so far {peak_mb:.0f} MB, search {1000 * latency:.0f} ms/query"
    )
    return seconds, latency


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--wattbot", type=Path, default=REPO.parent / "shared" / "wattbot")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kohaku-bench"))
    parser.add_argument("--no-scale", action="store_true")
    parser.add_argument("--keep-lake", action="store_true", help="reuse an existing lake (skip the cold run)")
    args = parser.parse_args()
    work: Path = args.work
    corpus = make_corpus(args.wattbot, work / "corpus")
    lake = work / "lake"
    settings = KohakuSettings(lake_root=str(lake), corpus_dir=str(corpus))
    if not args.keep_lake:
        shutil.rmtree(lake, ignore_errors=True)
        cold, summary = timed_index(settings)
        print(f"cold index: {cold:.1f}s for {summary['documents']} documents, nodes {summary['nodes']}")
        again, summary2 = timed_index(settings)
        print(
            f"re-index, nothing changed: {again:.2f}s ({again / cold:.3f} of cold; recomputed {summary2['recomputed']})"
        )
        change_one_document(corpus, "strubell2019")
        one, summary3 = timed_index(settings)
        print(
            f"re-index, one document changed: {one:.2f}s ({one / cold:.3f} of cold; recomputed {summary3['recomputed']})"
        )

    questions = load_gold(args.wattbot / "train_QA.csv")
    retriever = open_retriever(settings.lake, settings.index_config())
    # What `kohaku search` returns before its budget cut; evaluate() packs it to each budget.
    wide = replace(RetrievalConfig(), budget_chars=10**9)
    hier = evaluate(questions, lambda q: retriever.search([q], wide), BUDGETS)
    bm25, texts = flat_baseline(args.wattbot)

    def flat(q: str) -> list[ContextItem]:
        return [ContextItem(n.split(":")[0], n, "chunk", None, s, texts[n]) for n, s in bm25.search(q, 50)]

    base = evaluate(questions, flat, BUDGETS)
    print(base.row("flat BM25 (800-char chunks)"))
    print(hier.row("kohaku search (hierarchical)"))
    if not args.no_scale:
        one, lat1 = scale_run(args.wattbot, work, questions, copies=1)
        ten, lat10 = scale_run(args.wattbot, work, questions, copies=10)
        print(f"scale: 10x documents cost {ten / one:.1f}x the index time and {lat10 / lat1:.1f}x the search latency")


if __name__ == "__main__":
    main()
