"""Context quality for answering: what the LLM is shown, before any answer is generated.

On WattBot train, at the answering budgets (2,000-4,000 characters), for
  flat BM25      the question alone over 800-character chunks (the naive QA baseline's context);
  kohaku q-only  the hierarchical hybrid retriever with the question alone;
  kohaku planner the question plus the bundled LLM planner's rewrites, for rerank strategies
                 and weights of the rewrites against the question;
prints gold document first, gold document anywhere in the context, and evidence recall (the
quoted supporting text found in the context, see retrieval_eval.py). Planner replies are
cached under --work, so a second run costs seconds.

    python bench/retrieval/qa_context.py --lake LAKE [--work DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.indexing.index_wattbot import flat_baseline  # noqa: E402
from bench.retrieval.retrieval_eval import doc_ranking, evidence_found, load_gold  # noqa: E402
from kohaku_rag.answering.planner import plan_queries  # noqa: E402
from kohaku_rag.answers.question_files import load_questions  # noqa: E402
from kohaku_rag.answers.records import Question  # noqa: E402
from kohaku_rag.indexing.index_config import IndexConfig  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402
from kohaku_rag.llm import CachedChat  # noqa: E402
from kohaku_rag.llm.llama import LlamaCppChat  # noqa: E402
from kohaku_rag.llm.model_files import ensure_bundled_model  # noqa: E402
from kohaku_rag.retrieval.context import ContextItem, pack  # noqa: E402
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig  # noqa: E402
from kohaku_rag.retrieval.retriever import open_retriever  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", type=Path, required=True, help="a lake with the WattBot index built")
    parser.add_argument("--wattbot", type=Path, default=REPO.parent / "shared" / "wattbot")
    parser.add_argument("--work", type=Path, default=Path("/tmp/qa_context"), help="planner reply cache")
    parser.add_argument("--max-queries", type=int, default=3)
    args = parser.parse_args()

    gold = {g.id: g for g in load_gold(args.wattbot / "train_QA.csv")}
    questions = [q for q in load_questions(args.wattbot / "train_QA.csv") if q.id in gold]
    chat = CachedChat(LlamaCppChat(ensure_bundled_model(REPO / ".models"), n_ctx=4096), args.work / "llm")
    plans = {q.id: plan_queries(q.question, chat, args.max_queries).queries for q in questions}
    print(f"{len(questions)} answerable questions; planner: {chat.misses} LLM calls, {chat.hits} cached", flush=True)

    retriever = open_retriever(Lake(args.lake), IndexConfig())
    bm25, texts = flat_baseline(args.wattbot)

    def flat(q: Question, budget: int) -> list[ContextItem]:
        hits = bm25.search(q.question, 40)
        return pack([ContextItem(n.split(":")[0], n, "chunk", None, s, texts[n]) for n, s in hits], budget)

    def row(name: str, context: Callable[[Question], list[ContextItem]]) -> None:
        first = anywhere = found = with_quotes = 0
        for q in questions:
            g, items = gold[q.id], context(q)
            ranking = doc_ranking(items)
            first += bool(ranking) and ranking[0] in g.refs
            anywhere += any(d in g.refs for d in ranking)
            if g.evidence:
                with_quotes += 1
                found += evidence_found(g, items)
        n = len(questions)
        print(
            f"{name:<44} doc@1={first / n:.3f}  doc in context={anywhere / n:.3f}  "
            f"evidence={found / max(with_quotes, 1):.3f}",
            flush=True,
        )

    base = RetrievalConfig()
    for budget in (2000, 3000, 4000):
        print(f"\n== budget {budget} characters")
        cfg = dataclasses.replace(base, budget_chars=budget)
        row("flat BM25, question only", lambda q: flat(q, budget))
        row("kohaku, question only", lambda q: retriever.search([q.question], cfg))
        # "combined_max" is ours (the default); "combined" is KohakuRAG's published formula.
        for strategy, alpha, weight in [
            ("combined_max", 0.5, 1.0),
            ("frequency", None, 1.0),
            ("score", None, 1.0),
            ("combined_max", 0.25, 0.5),
            ("combined_max", 0.25, 0.25),
            ("combined", 0.4, 1.0),
        ]:
            c = dataclasses.replace(cfg, rerank=strategy, alpha=alpha, planned_query_weight=weight)
            default = (base.rerank, base.effective_alpha, base.planned_query_weight)
            marker = "  (default)" if (strategy, c.effective_alpha, weight) == default else ""
            row(
                f"kohaku + planner, {strategy} a={alpha} w={weight}{marker}", lambda q: retriever.search(plans[q.id], c)
            )


if __name__ == "__main__":
    main()
