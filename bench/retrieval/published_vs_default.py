"""KohakuRAG's published retrieval settings against today's default, in one run.

On WattBot train (`train_QA.csv`), for each retrieval setting:
  retrieval   gold-document MRR, R@1, and evidence recall at 4,000 and 8,000 context
              characters (bench/retrieval/retrieval_eval.py), with the question alone and with the
              bundled LLM planner's queries (the answering pipeline's input);
  answering   the WattBot score with the bundled Qwen2.5-Coder-1.5B, one run each, on the
              first --limit questions (0 skips it: ~30-40 s per question per setting on 2 cores).
Settings:
  default     RetrievalConfig(): BM25 fused by RRF with dense paragraph search (0.1), rerank
              combined_max (alpha 0.25), the planner's rewrites weighted 0.25, tree dedup
  published   RetrievalConfig.published(): dense search over sentences and paragraphs
              together ranked by similarity, BM25 hits appended after the dense ones, rerank
              combined (0.4 freq/max + 0.6 summed similarity/max), every query weighted 1,
              node-id dedup; the same top_k, top_k_final and budget
and one-change ablations between them. Planner replies are cached under --work.

    python bench/retrieval/published_vs_default.py --lake LAKE [--limit 12] [--work DIR] [--models DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.retrieval.retrieval_eval import evaluate, load_gold, print_running_scores  # noqa: E402
from kohaku_rag.answering.answer import answer_runs, plan_for  # noqa: E402
from kohaku_rag.answering.qa_config import QAConfig, RetrievalPart  # noqa: E402
from kohaku_rag.answering.qa_tables import corpus_ids  # noqa: E402
from kohaku_rag.answers.question_files import load_questions  # noqa: E402
from kohaku_rag.indexing.index_config import IndexConfig  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402
from kohaku_rag.llm import CachedChat  # noqa: E402
from kohaku_rag.llm.llama import LlamaCppChat  # noqa: E402
from kohaku_rag.llm.model_files import ensure_bundled_model  # noqa: E402
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig  # noqa: E402
from kohaku_rag.retrieval.retriever import open_retriever  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BUDGETS = (4000, 8000)


def settings() -> dict[str, RetrievalConfig]:
    default, published = RetrievalConfig(), RetrievalConfig.published()
    return {
        "default": default,
        "published": published,
        "default + rerank combined": replace(default, rerank="combined"),
        "default + sent+para joint": replace(default, dense_kinds=("sentence", "paragraph"), dense_search="joint"),
        "default + bm25 append": replace(default, bm25_mode="append"),
        "published + bm25 fuse": replace(published, bm25_mode="fuse"),
        "published, paragraphs only": replace(published, dense_kinds=("paragraph",), dense_search="separate"),
        # The dense weight of the default (0.1 against BM25 1.0), and what it was chosen over.
        "default, dense weight 1.0": replace(default, dense_weight=1.0),
        "default, dense weight 0.3": replace(default, dense_weight=0.3),
        "default, BM25 only": replace(default, dense_weight=0.0),
        "default, dense only": replace(default, bm25_top_k=0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", type=Path, required=True, help="a lake with the WattBot index built")
    parser.add_argument("--wattbot", type=Path, default=REPO.parent / "shared" / "wattbot")
    parser.add_argument("--work", type=Path, default=Path("/tmp/published_vs_default"), help="LLM reply cache")
    parser.add_argument("--models", type=Path, default=REPO / ".models", help="where the bundled GGUF is")
    parser.add_argument("--limit", type=int, default=12, help="questions answered by the LLM per setting (0: none)")
    args = parser.parse_args()

    csv = args.wattbot / "train_QA.csv"
    gold = load_gold(csv)
    questions = load_questions(csv)
    lake = Lake(args.lake)
    retriever = open_retriever(lake, IndexConfig())
    chat = CachedChat(LlamaCppChat(ensure_bundled_model(args.models), n_ctx=4096), args.work / "llm")
    base = QAConfig(questions=str(csv))
    header = f"{'setting':<28} {'queries':<9} {'MRR':>6} {'R@1':>6} {'ev@4K':>6} {'ev@8K':>6} {'ms/q':>6}"

    def table(label: str, queries_of) -> None:  # noqa: ANN001
        for name, cfg in settings().items():
            wide = replace(cfg, budget_chars=10**9, mark_sentences=0)
            m = evaluate(gold, lambda q, c=wide: retriever.search(queries_of(q), c), BUDGETS)
            print(
                f"{name:<28} {label:<9} {m.mrr:6.3f} {m.recall_at_1:6.3f} {m.evidence[4000]:6.3f} "
                f"{m.evidence[8000]:6.3f} {1000 * m.seconds_per_query:6.0f}",
                flush=True,
            )

    # The question alone first (no LLM), then with the planner's queries.
    print(f"{len(gold)} questions with a gold document\n\n{header}\n" + "-" * len(header), flush=True)
    table("question", lambda q: [q])
    started = time.perf_counter()
    plans = {q.question: plan_for(q, chat, base) for q in questions}
    print(f"planner: {chat.misses} LLM calls, {chat.hits} cached, {time.perf_counter() - started:.0f}s", flush=True)
    table("planner", lambda q: list(plans[q]))

    if args.limit <= 0:
        return
    asked = [q for q in questions if q.gold is not None][: args.limit]
    known = corpus_ids(lake)
    names = ("default", "published")
    cfgs = {n: replace(base, retrieval=RetrievalPart(search=settings()[n])) for n in names}
    preds: dict[str, dict] = {n: {} for n in names}
    seconds: dict[str, float] = dict.fromkeys(names, 0.0)
    print("\nWattBot score, bundled LLM, 1 run each, train questions in file order (running totals)")
    print(f"{'after':<6} {'setting':<10} {'final':>6} {'value':>6} {'ref':>6} {'na':>6} {'s/q':>5}")
    # Question by question, both settings, so a stopped run still compares them on the same questions.
    for n, q in enumerate(asked, start=1):
        for name in names:
            t0 = time.perf_counter()
            (pred,) = answer_runs(q, plans[q.question], retriever, chat, cfgs[name], [0])
            preds[name][q.id] = pred.answer
            seconds[name] += time.perf_counter() - t0
            print(
                f"  {q.id} {name}: {pred.answer.answer_value} {list(pred.answer.ref_id)}", file=sys.stderr, flush=True
            )
        print_running_scores(asked[:n], preds, seconds, known)


if __name__ == "__main__":
    main()
