"""The winning systems as configs, side by side on WattBot train, in one run.

One row per QA config file in bench/retrieval/methods/ (KohakuRAG's default, HERO with all its
retrieval options, Marikarp's interleaved merge, the best combination found on train):
  retrieval   gold-document MRR, R@1, evidence recall at 4,000 and 8,000 context characters
              (bench/retrieval/retrieval_eval.py) and ms per query, with the question alone (no LLM);
              its first row, the default, is the same-run baseline;
  --llm-rerank N   HERO's cross-encoder step on the best config, with the bundled LLM as the
              cross-encoder (the top --rerank-top-n units scored by yes/no token probabilities),
              on the first N gold questions, against the same config without it on the same
              questions, with seconds per question;
  --llm N     for the three best configs by retrieval (MRR + evidence @4K), the WattBot score
              with the bundled Qwen2.5-Coder-1.5B (planner + answer, one run) on the first N
              train questions, and seconds per question (30-60 s each on 2 shared cores).
The retrieval rows search with the question alone; HERO's question-type routing, its two
stages and Marikarp's knowledge-aware diverse rerank (which needs the LLM) act in the --llm
rows (bench/retrieval/generation_methods.py measures their retrieval side). LLM replies are cached
under --work.

    python bench/retrieval/methods.py --lake LAKE [--corpus DIR] [--llm 12 [--llm-configs a,b,c]] [--llm-rerank 8]
                            [--work DIR] [--models DIR]

The lake's search aids are assembled first if they are missing or behind (from its index
rows and the corpus's metadata.csv, as `kohaku index` would; nothing is re-indexed).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.retrieval.retrieval_eval import Metrics, evaluate, load_gold, print_running_scores  # noqa: E402
from kohaku_rag.answering.answer import answer_runs, plan_for  # noqa: E402
from kohaku_rag.answering.qa_config import QAConfig  # noqa: E402
from kohaku_rag.answering.qa_config_file import load_qa_config  # noqa: E402
from kohaku_rag.answering.qa_tables import corpus_ids  # noqa: E402
from kohaku_rag.answering.searcher import answering_searcher  # noqa: E402
from kohaku_rag.answers.question_files import load_questions  # noqa: E402
from kohaku_rag.answers.records import Answer  # noqa: E402
from kohaku_rag.indexing.index_config import recorded_index_config  # noqa: E402
from kohaku_rag.indexing.search_aids import assemble_search_aids, search_aids_behind  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402
from kohaku_rag.llm import CachedChat  # noqa: E402
from kohaku_rag.llm.llama import LlamaCppChat  # noqa: E402
from kohaku_rag.llm.model_files import ensure_bundled_model  # noqa: E402
from kohaku_rag.retrieval.rerankers import LLMReranker, RerankerSpec  # noqa: E402
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig  # noqa: E402
from kohaku_rag.retrieval.retriever import Retriever, open_retriever  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CONFIGS = Path(__file__).resolve().parent / "methods"
ORDER = ("kohakurag", "hero", "marikarp", "best")  # the baseline first; other files after
BUDGETS = (4000, 8000)
# Each HERO/Marikarp option alone on top of the default (the first config), to show which
# part of a system helps or hurts on this corpus.
ABLATIONS: dict[str, dict[str, object]] = {
    "+ type weights 1/2/1.8": {"type_weight_table": 2.0, "type_weight_figure": 1.8},
    "+ metadata boost 2.0": {"metadata_boost": 2.0},
    "+ metadata boost, author only": {"metadata_boost": 2.0, "metadata_fields": ("author",)},
    "+ query expansion (BM25)": {"query_expansion": "bm25"},
    "+ query expansion (all)": {"query_expansion": "all"},
    "+ interleave": {"fusion": "interleave"},
    "+ 150 hits, equal weights": {"top_k": 150, "bm25_top_k": 150, "dense_weight": 1.0},
}


def load_configs(folder: Path) -> dict[str, QAConfig]:
    files = sorted(folder.glob("*.toml"), key=lambda p: (ORDER.index(p.stem) if p.stem in ORDER else 99, p.stem))
    return {p.stem: load_qa_config(p) for p in files}


def wide(cfg: RetrievalConfig) -> RetrievalConfig:
    """The whole ranked context (the metric packs it into each budget itself)."""
    return replace(cfg, budget_chars=10**9, mark_sentences=0)


def retrieval_row(name: str, m: Metrics) -> str:
    return (
        f"{name:<30} {m.mrr:6.3f} {m.recall_at_1:6.3f} {m.evidence[4000]:6.3f} {m.evidence[8000]:6.3f} "
        f"{1000 * m.seconds_per_query:6.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", type=Path, required=True, help="a lake with the WattBot index built")
    parser.add_argument("--wattbot", type=Path, default=REPO.parent / "shared" / "wattbot")
    parser.add_argument("--corpus", type=Path, default=Path("/tmp/kohaku-bench/corpus"), help="its metadata.csv")
    parser.add_argument("--configs", type=Path, default=CONFIGS, help="one QA config file per system")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kohaku_methods"), help="LLM reply cache")
    parser.add_argument("--models", type=Path, default=REPO / ".models", help="where the bundled GGUF is")
    parser.add_argument("--llm", type=int, default=0, help="train questions answered per top-3 config (0: none)")
    parser.add_argument("--llm-configs", default="", help="configs answered with --llm (default: top 3 by retrieval)")
    parser.add_argument("--llm-rerank", type=int, default=0, help="gold questions reranked by the LLM (0: none)")
    parser.add_argument("--rerank-top-n", type=int, default=10, help="units the LLM reranker scores per question")
    args = parser.parse_args()

    csv = args.wattbot / "train_QA.csv"
    gold = load_gold(csv)
    lake = Lake(args.lake)
    index_cfg = recorded_index_config(lake)
    if index_cfg is None:
        raise SystemExit(f"{lake.root}: no index_config.json; index the corpus first")
    docs = corpus_ids(lake)
    behind = search_aids_behind(lake, docs, args.corpus)
    if behind:  # what `kohaku index` would do on this lake: no document is re-indexed
        started = time.perf_counter()
        stats = assemble_search_aids(lake, docs, args.corpus)
        print(
            f"search aids assembled ({len(behind)} behind): {stats.terms} terms, {time.perf_counter() - started:.1f}s"
        )
    retriever = open_retriever(lake, index_cfg)
    configs = load_configs(args.configs)
    header = f"{'config':<30} {'MRR':>6} {'R@1':>6} {'ev@4K':>6} {'ev@8K':>6} {'ms/q':>6}"
    print(f"{len(gold)} train questions with a gold document; question alone, no LLM\n\n{header}\n" + "-" * len(header))
    metrics: dict[str, Metrics] = {}
    for name, cfg in configs.items():
        search = wide(cfg.retrieval.search)
        if search.reranker is not None and search.reranker.backend == "llm":
            print(f"{name:<30} (LLM reranker: see --llm-rerank)")
            continue
        retriever.search(["warm-up"], search)  # load the caches before timing
        metrics[name] = evaluate(gold, lambda q, c=search: retriever.search([q], c), BUDGETS)
        print(retrieval_row(name, metrics[name]), flush=True)
    baseline = wide(next(iter(configs.values())).retrieval.search)
    for name, change in ABLATIONS.items():
        search = replace(baseline, **change)  # type: ignore[arg-type]
        print(retrieval_row(name, evaluate(gold, lambda q, c=search: retriever.search([q], c), BUDGETS)), flush=True)
    if args.llm_rerank > 0:
        base = configs.get("best", next(iter(configs.values())))
        llm_rerank_rows(args, retriever, base.retrieval.search, gold[: args.llm_rerank])
    if args.llm > 0:
        top = sorted(metrics, key=lambda n: -(metrics[n].mrr + metrics[n].evidence[4000]))[:3]
        if args.llm_configs:
            top = args.llm_configs.split(",")
        llm_rows(args, lake, retriever, {n: configs[n] for n in top}, csv)


def bundled_chat(args: argparse.Namespace) -> CachedChat:
    return CachedChat(LlamaCppChat(ensure_bundled_model(args.models), n_ctx=4096), args.work / "llm")


def llm_rerank_rows(args: argparse.Namespace, retriever: Retriever, search: RetrievalConfig, gold: list) -> None:  # type: ignore[type-arg]
    """HERO's cross-encoder step with the bundled LLM as the cross-encoder, and its cost."""
    chat = bundled_chat(args)
    reranker = LLMReranker(chat, max_passage_tokens=256)
    spec = RerankerSpec(backend="llm")
    retriever._rerankers[spec] = reranker  # noqa: SLF001 - the bench's own chat (its cache, its counters)
    print(f"\nbest + the bundled LLM as cross-encoder, top {args.rerank_top_n}, first {len(gold)} gold questions")
    print(f"{'config':<30} {'MRR':>6} {'R@1':>6} {'ev@4K':>6} {'ev@8K':>6} {'ms/q':>6}")
    base = wide(search)
    print(retrieval_row("best", evaluate(gold, lambda q: retriever.search([q], base), BUDGETS)), flush=True)
    ranked = replace(base, reranker=spec, rerank_top_n=args.rerank_top_n)
    m = evaluate(gold, lambda q: retriever.search([q], ranked), BUDGETS)
    print(retrieval_row("best + LLM rerank", m), flush=True)
    print(f"  LLM calls {chat.misses}, cached {chat.hits}; {m.seconds_per_query:.1f} s/question", flush=True)


def llm_rows(
    args: argparse.Namespace, lake: Lake, retriever: Retriever, configs: dict[str, QAConfig], csv: Path
) -> None:
    """The WattBot score of each config with the bundled LLM, question by question so a
    stopped run still compares them on the same questions."""
    chat = bundled_chat(args)
    questions = [q for q in load_questions(csv) if q.gold is not None][: args.llm]
    known = corpus_ids(lake)
    preds: dict[str, dict[str, Answer]] = {n: {} for n in configs}
    seconds = dict.fromkeys(configs, 0.0)
    print(f"\nWattBot score, bundled LLM, 1 run, first {len(questions)} train questions (running totals)")
    print(f"{'after':<6} {'config':<12} {'final':>6} {'value':>6} {'ref':>6} {'na':>6} {'s/q':>5}")
    for n, q in enumerate(questions, start=1):
        for name, cfg in configs.items():
            t0 = time.perf_counter()
            # The config's searcher: the retriever, or Marikarp's diverse rerank over it.
            searcher = answering_searcher(retriever, cfg.retrieval, chat)
            (pred,) = answer_runs(q, plan_for(q, chat, cfg), searcher, chat, cfg, [0])
            preds[name][q.id] = pred.answer
            seconds[name] += time.perf_counter() - t0
        print_running_scores(questions[:n], preds, seconds, known, width=12)


if __name__ == "__main__":
    main()
