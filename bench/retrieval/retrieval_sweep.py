"""Issue 34's retrieval sweep: every retrieval lever that needs no LLM, on train + dev (133
labelled questions), against the same-run default, with paired bootstrap CIs.

For each setting (one lever on top of the default retrieval, then combinations), the question
alone is searched (no planner: the planner needs the LLM), and per question: the gold
document's reciprocal rank (questions with a gold document) and whether the gold quote is in
the context packed at 2,000 / 2,500 / 3,000 / 4,000 characters (questions whose gold has a
quote; retrieval_eval.evidence_found). Each row is then compared with the default over the
same questions (bench/paired_tables.py over evaluation.run_stats.paired_bootstrap, 95%), on train, dev and both.
`--split` rows search one query per entity the question names (the rule-based split,
answering/entity_split.py) with a share of the context each; `multi` restricts a table to the
questions whose gold cites two or more documents.

    python bench/retrieval/retrieval_sweep.py --lake LAKE [--only 'NAME|NAME'] [--markdown FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.paired_tables import diff_cell  # noqa: E402
from bench.retrieval.retrieval_eval import GoldQuestion, doc_ranking, evidence_found, load_gold  # noqa: E402
from kohaku_rag.indexing.index_config import recorded_index_config  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig  # noqa: E402
from kohaku_rag.retrieval.retriever import Retriever, open_retriever  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BUDGETS = (2000, 2500, 3000, 4000)
WINDOWS: dict[str, object] = {"pack": "windows"}
SETTINGS: dict[str, dict[str, object]] = {
    "default": {},
    "top_k_final 8": {"top_k_final": 8},
    "top_k_final 12": {"top_k_final": 12},
    "top_k_final 24": {"top_k_final": 24},
    "passages 256/64 w0.5": {"passage_weight": 0.5},
    "passages 256/64 w1.0": {"passage_weight": 1.0},
    "passages 128/32 w1.0": {"passage_weight": 1.0, "passage_tokens": 128, "passage_overlap": 32},
    "windows 2 best ±1": WINDOWS,
    "windows 3 best ±1": {**WINDOWS, "window_sentences": 3},
    "windows 2 best ±2": {**WINDOWS, "window_neighbours": 2},
    "windows, 24 units": {**WINDOWS, "top_k_final": 24},
    "field 0.3": {"field_weight": 0.3},
    "field 1.0": {"field_weight": 1.0},
    "RM3 10 terms": {"rm3_terms": 10},
    "RM3 20t 5d 0.7": {"rm3_terms": 20, "rm3_docs": 5, "rm3_query_weight": 0.7},
    "passages 1.0 + windows": {**WINDOWS, "passage_weight": 1.0},
    "passages 1.0 + windows 24u": {**WINDOWS, "passage_weight": 1.0, "top_k_final": 24},
    "passages 1.0 + field 0.3": {"passage_weight": 1.0, "field_weight": 0.3},
    "passages 1.0 + RM3 10": {"passage_weight": 1.0, "rm3_terms": 10},
}


@dataclass(frozen=True)
class PerQuestion:
    """One setting's per-question scores: reciprocal rank (None: no gold document) and
    evidence found per budget (None: the gold has no quote)."""

    rr: float
    evidence: dict[int, float] | None


@dataclass(frozen=True)
class Run:
    name: str
    scores: dict[str, PerQuestion]  # question id -> scores
    seconds_per_query: float


Queries = Callable[[str], list[str]]


def question_only(question: str) -> list[str]:
    return [question]


def measure(retriever: Retriever, gold: Sequence[GoldQuestion], cfg: RetrievalConfig, queries: Queries) -> Run:
    """Search wide (no budget, whole paragraphs), then pack to each budget as `cfg` packs."""
    wide = replace(cfg, budget_chars=10**9, mark_sentences=0, pack="paragraphs")
    retriever.context.pack("warm-up", retriever.search(["warm-up"], wide), cfg)  # builds any in-memory index
    scores: dict[str, PerQuestion] = {}
    started = time.perf_counter()
    for q in gold:
        items = retriever.search(queries(q.question), wide)
        docs = doc_ranking(items)
        rank = next((i for i, d in enumerate(docs, start=1) if d in set(q.refs)), None)
        evidence = None
        if q.evidence:
            evidence = {
                b: float(
                    evidence_found(
                        q, retriever.context.pack(q.question, items, replace(cfg, budget_chars=b, mark_sentences=0))
                    )
                )
                for b in BUDGETS
            }
        scores[q.id] = PerQuestion(1.0 / rank if rank else 0.0, evidence)
    return Run("", scores, (time.perf_counter() - started) / max(len(gold), 1))


def table(runs: Sequence[Run], ids: set[str], title: str) -> list[str]:
    """A markdown table over the questions `ids`: the metrics, then each row's paired
    difference from the first (the default) with its 95% CI, for ev@4K and MRR."""
    base = runs[0]
    with_quote = sorted(i for i in ids if base.scores[i].evidence is not None)
    all_ids = sorted(ids)
    head = (
        f"### {title}: {len(all_ids)} questions with a gold document, {len(with_quote)} with a gold quote\n\n"
        "| setting | MRR | ev@2K | ev@2.5K | ev@3K | ev@4K | Δev@4K [95% CI] | Δev@2.5K [95% CI] | ΔMRR [95% CI] "
        "| ms/q |\n|---|---|---|---|---|---|---|---|---|---|"
    )
    out = [head]

    def ev(run: Run, b: int) -> list[float]:
        return [run.scores[i].evidence[b] for i in with_quote]  # type: ignore[index]

    def rr(run: Run) -> list[float]:
        return [run.scores[i].rr for i in all_ids]

    def ci(a: list[float], b: list[float]) -> str:
        return diff_cell(a, b, " *")

    for run in runs:
        mean = lambda xs: sum(xs) / max(len(xs), 1)  # noqa: E731
        evs = " | ".join(f"{mean(ev(run, b)):.3f}" for b in BUDGETS)
        diffs = (
            "—|—|—"
            if run is base
            else f"{ci(ev(run, 4000), ev(base, 4000))} | {ci(ev(run, 2500), ev(base, 2500))} | {ci(rr(run), rr(base))}"
        )
        out.append(f"| {run.name} | {mean(rr(run)):.3f} | {evs} | {diffs} | {1000 * run.seconds_per_query:.0f} |")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", type=Path, required=True, help="a lake with the WattBot index built")
    parser.add_argument("--wattbot", type=Path, default=REPO.parent / "shared" / "wattbot")
    parser.add_argument("--only", default="", help="setting names separated by | (default: all)")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    parser.add_argument("--split", action="store_true", help="add the rule-based entity split rows")
    args = parser.parse_args()

    train = load_gold(args.wattbot / "train_QA.csv")
    dev = load_gold(args.wattbot / "dev_QA.csv")
    gold = [replace(q, id=f"train/{q.id}") for q in train] + [replace(q, id=f"dev/{q.id}") for q in dev]
    lake = Lake(args.lake)
    index_cfg = recorded_index_config(lake)
    if index_cfg is None:
        raise SystemExit(f"{lake.root}: no index_config.json; index the corpus first")
    retriever = open_retriever(lake, index_cfg)
    names = [n for n in args.only.split("|") if n] or list(SETTINGS)
    if "default" not in names:
        names.insert(0, "default")
    plans: list[tuple[str, RetrievalConfig, Queries]] = [
        (n, replace(RetrievalConfig(), **SETTINGS[n]), question_only)  # type: ignore[arg-type]
        for n in names
    ]
    if args.split:
        plans += split_plans()
    runs = []
    for name, cfg, queries in plans:
        run = replace(measure(retriever, gold, cfg, queries), name=name)
        runs.append(run)
        print(f"{name:<32} done, {1000 * run.seconds_per_query:.0f} ms/q", flush=True)
    multi = {q.id for q in gold if len(q.refs) > 1}
    tables = [
        ("train", {q.id for q in gold if q.id.startswith("train/")}),
        ("dev", {q.id for q in gold if q.id.startswith("dev/")}),
        ("train + dev", {q.id for q in gold}),
        ("multi-document (gold cites 2+ documents)", multi),
    ]
    if args.split:
        from kohaku_rag.answering.entity_split import entity_queries

        tables.append(("questions the rule-based split divides", {q.id for q in gold if entity_queries(q.question)}))
    lines = [
        "Question alone (no planner), each setting against the same-run default; paired bootstrap "
        "(2,000 resamples, 95%); * the CI excludes 0.",
        "",
    ]
    for title, ids in tables:
        lines += [*table(runs, ids, title), ""]
    lines += [*budget_table(runs[0], tables[:3]), ""]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n", encoding="utf-8")


def budget_table(base: Run, tables: Sequence[tuple[str, set[str]]]) -> list[str]:
    """The default's evidence recall at each smaller budget against 4,000 characters, paired."""
    out = [
        "### the default's budget: evidence recall at each budget minus at 4,000 characters [95% CI]",
        "",
        "| questions | " + " | ".join(f"{b:,}" for b in BUDGETS[:-1]) + " |",
        "|---" * len(BUDGETS) + "|",
    ]
    for title, ids in tables:
        quoted = sorted(i for i in ids if base.scores[i].evidence is not None)
        at = {b: [base.scores[i].evidence[b] for i in quoted] for b in BUDGETS}  # type: ignore[index]
        cells = [diff_cell(at[b], at[4000], " *") for b in BUDGETS[:-1]]
        out.append(f"| {title} ({len(quoted)}) | " + " | ".join(cells) + " |")
    return out


def split_plans() -> list[tuple[str, RetrievalConfig, Queries]]:
    """The rule-based entity split, with a share of the context per entity query."""
    from kohaku_rag.answering.entity_split import entity_queries

    def split(question: str) -> list[str]:
        return [question, *entity_queries(question)]

    base = RetrievalConfig()
    return [
        (f"split, share {s}, weight {w}", replace(base, query_share=s, planned_query_weight=w), split)
        for s in (0, 1, 2, 3)
        for w in (0.25, 1.0)
    ]


if __name__ == "__main__":
    main()
