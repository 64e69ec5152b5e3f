"""HERO's question-type routing, text-only/hybrid retrieval and two-stage generation, and
Marikarp's knowledge-aware diverse rerank, against the default config, in one run.

On WattBot train (`train_QA.csv`):
  types       the question-type detector's distribution (question_types.py)
  retrieval   gold-document MRR, R@1, evidence recall at 4,000 and 8,000 context characters
              and ms/query (bench/retrieval/retrieval_eval.py), the question alone as the query, for
              the default, text-only nodes for every question, and HERO's content routing
              by question type; with --llm N also Marikarp's diverse rerank (the bundled
              LLM declares the knowledge, the EmbeddingReranker ranks) on the first N
              questions with a gold document, beside the default on the same questions
  answering   with --llm N: the WattBot score with the bundled Qwen2.5-Coder-1.5B, one run,
              on the first N train questions, for the default, HERO (prompt routing,
              two-stage generation, content routing) and Marikarp (diverse rerank), and the
              seconds per question (retrieval LLM calls included)
LLM replies are cached under --work, so a re-run costs nothing.

    python bench/retrieval/generation_methods.py --lake LAKE [--llm N] [--planner] [--work DIR] [--models DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.retrieval.retrieval_eval import GoldQuestion, Metrics, evaluate, load_gold, print_running_scores  # noqa: E402
from kohaku_rag.answering.answer import answer_runs, deepen, plan_for  # noqa: E402
from kohaku_rag.answering.diverse_rerank import ranked_ids, reranker_for  # noqa: E402
from kohaku_rag.answering.qa_config import GenerationPart, QAConfig, RetrievalPart  # noqa: E402
from kohaku_rag.answering.qa_tables import corpus_ids  # noqa: E402
from kohaku_rag.answering.question_types import detect_type, search_config, type_counts  # noqa: E402
from kohaku_rag.answering.searcher import answering_searcher  # noqa: E402
from kohaku_rag.answering.stages import stage_for  # noqa: E402
from kohaku_rag.answers.question_files import load_questions  # noqa: E402
from kohaku_rag.answers.records import Answer, Question  # noqa: E402
from kohaku_rag.indexing.index_config import IndexConfig  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402
from kohaku_rag.llm import CachedChat, ChatModel  # noqa: E402
from kohaku_rag.llm.llama import LlamaCppChat  # noqa: E402
from kohaku_rag.llm.model_files import ensure_bundled_model  # noqa: E402
from kohaku_rag.llm.openai_compat import OpenAIChat  # noqa: E402
from kohaku_rag.retrieval.context import ContextItem  # noqa: E402
from kohaku_rag.retrieval.rerankers import Reranker  # noqa: E402
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig  # noqa: E402
from kohaku_rag.retrieval.retriever import Retriever, open_retriever  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BUDGETS = (4000, 8000)
WIDE = 10**9  # no budget cut: evaluate() packs each budget itself


def configs(questions: str, use_planner: bool, n_know: int) -> dict[str, QAConfig]:
    base = QAConfig(questions=questions, retrieval=RetrievalPart(use_planner=use_planner))
    return {
        "default": base,
        "text only": replace(
            base, retrieval=replace(base.retrieval, search=replace(base.retrieval.search, content="text"))
        ),
        "HERO": replace(
            base,
            retrieval=replace(base.retrieval, content_routing="question_type"),
            generation=GenerationPart(prompt_routing="question_type", two_stage=True, max_retries=2),
        ),
        "Marikarp": replace(base, retrieval=replace(base.retrieval, diverse_rerank=True, diverse_n_know=n_know)),
        "Marikarp embed": replace(
            base,
            retrieval=replace(base.retrieval, diverse_rerank=True, diverse_n_know=n_know, diverse_reranker="embedding"),
        ),
    }


def initial_rerank_rows(cfg: QAConfig, gold: list[GoldQuestion], retriever: Retriever) -> None:
    """Marikarp's step 1 alone (no LLM): the candidates ranked by each offline reranker."""
    for name in ("bm25", "embedding"):
        part = replace(cfg.retrieval, diverse_reranker=name)
        reranker = reranker_for(part, retriever)
        pool = replace(cfg.retrieval.search, top_k_final=part.diverse_candidates, budget_chars=WIDE, mark_sentences=0)

        def ranked(text: str, reranker: Reranker = reranker, pool: RetrievalConfig = pool) -> list[ContextItem]:
            items = retriever.search([text], pool)
            by_id = {i.node_id: i for i in items}
            return [by_id[n] for n in ranked_ids(reranker, text, items)][: cfg.retrieval.search.top_k_final]

        row(f"rerank {name}", evaluate(gold, ranked, BUDGETS))


def row(name: str, m: Metrics) -> None:
    print(
        f"{name:<16} {m.mrr:6.3f} {m.recall_at_1:6.3f} {m.evidence[4000]:6.3f} {m.evidence[8000]:6.3f} "
        f"{1000 * m.seconds_per_query:8.0f} {m.n_questions:4d}",
        flush=True,
    )


def ranked_by(
    cfg: QAConfig, retriever: Retriever, chat: ChatModel | None, by_text: dict[str, Question]
) -> Callable[[str], list[ContextItem]]:
    """The config's full ranking of a question (the question alone as the query)."""
    searcher = answering_searcher(retriever, cfg.retrieval, chat)

    def ranked(text: str) -> list[ContextItem]:
        wide = replace(search_config(by_text[text], cfg.retrieval), budget_chars=WIDE, mark_sentences=0)
        return searcher.search([text], wide)

    return ranked


def retrieval_rows(
    names: list[str],
    cfgs: dict[str, QAConfig],
    gold: list[GoldQuestion],
    retriever: Retriever,
    chat: ChatModel | None,
    by_text: dict[str, Question],
) -> None:
    for name in names:
        row(name, evaluate(gold, ranked_by(cfgs[name], retriever, chat, by_text), BUDGETS))


def stage_rows(cfg: QAConfig, gold: list[GoldQuestion], retriever: Retriever, by_text: dict[str, Question]) -> None:
    """What each of HERO's two stages reads: stage 1 the type's top units of the first
    search, stage 2 the type's relaxed units of the deeper (level 2) search."""
    for level in (1, 2):
        name = f"HERO stage {level}"

        def ranked(text: str, level: int = level) -> list[ContextItem]:
            q = by_text[text]
            stage = stage_for(q, cfg.generation, level)
            wide = replace(deepen(search_config(q, cfg.retrieval), level), budget_chars=WIDE, mark_sentences=0)
            return retriever.search([text], wide)[: stage.k]

        row(name, evaluate(gold, ranked, BUDGETS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", type=Path, required=True, help="a lake with the WattBot index built")
    parser.add_argument("--wattbot", type=Path, default=REPO.parent / "shared" / "wattbot")
    parser.add_argument("--work", type=Path, default=Path("/tmp/generation_methods"), help="LLM reply cache")
    parser.add_argument("--models", type=Path, default=REPO / ".models", help="where the bundled GGUF is")
    parser.add_argument("--llm", type=int, default=0, help="questions answered with the bundled LLM (0: none)")
    parser.add_argument("--planner", action="store_true", help="search with the LLM planner's queries too")
    parser.add_argument("--llm-url", help="an OpenAI-compatible server (its /v1) instead of the bundled model")
    parser.add_argument("--llm-model", default="default", help="the model name sent to --llm-url")
    parser.add_argument("--embed", action="store_true", help="with --llm: Marikarp with the embedding reranker too")
    parser.add_argument("--n-know", type=int, default=RetrievalPart().diverse_n_know, help="Marikarp's N_know")
    args = parser.parse_args()

    csv = args.wattbot / "train_QA.csv"
    questions = load_questions(csv)
    by_text = {q.question: q for q in questions}
    gold = load_gold(csv)
    lake = Lake(args.lake)
    retriever = open_retriever(lake, IndexConfig())
    cfgs = configs(str(csv), args.planner, args.n_know)

    counts = type_counts(questions)
    print(f"question types over {len(questions)} train questions:")
    for kind, n in counts.items():
        print(f"  {kind:<18} {n:3d}")

    header = f"{'setting':<16} {'MRR':>6} {'R@1':>6} {'ev@4K':>6} {'ev@8K':>6} {'ms/query':>8} {'q':>4}"
    print(f"\nretrieval, the question alone as the query\n{header}\n" + "-" * len(header), flush=True)
    retrieval_rows(["default", "text only", "HERO"], cfgs, gold, retriever, None, by_text)
    stage_rows(cfgs["HERO"], gold, retriever, by_text)
    initial_rerank_rows(cfgs["default"], gold, retriever)
    if args.llm <= 0:
        return

    inner: ChatModel = (
        OpenAIChat(args.llm_url, args.llm_model, api_key_env=None)
        if args.llm_url
        else LlamaCppChat(ensure_bundled_model(args.models), n_ctx=4096)
    )
    chat = CachedChat(inner, args.work / "llm")
    first = gold[: args.llm]
    print(f"\nretrieval on the first {len(first)} questions with a gold document (bundled LLM for Marikarp)")
    print(f"{header}\n" + "-" * len(header), flush=True)
    started, misses = time.perf_counter(), chat.misses
    # HERO's routing searches like the default on an index without table or figure nodes
    # (the rows above); "Marikarp embed" (the MiniLM reranker) only with --embed: its initial
    # rerank alone already loses evidence (above), and each row costs N x (N_know + 1) calls.
    names = ["default", "Marikarp", *(["Marikarp embed"] if args.embed else [])]
    retrieval_rows(names, cfgs, first, retriever, chat, by_text)
    took = time.perf_counter() - started
    print(
        f"  Marikarp's knowledge calls: {chat.misses - misses} LLM calls, {took:.0f}s "
        f"({took / max(len(first), 1):.0f} s/question; cached for the answering runs below)",
        flush=True,
    )

    asked = questions[: args.llm]
    known = corpus_ids(lake)
    names = ["default", "HERO", "Marikarp"]
    preds: dict[str, dict[str, Answer]] = {n: {} for n in names}
    seconds = dict.fromkeys(names, 0.0)
    print("\nWattBot score, bundled LLM, 1 run each, train questions in file order (running totals)")
    print(f"{'after':<6} {'setting':<10} {'final':>6} {'value':>6} {'ref':>6} {'na':>6} {'s/q':>5}", flush=True)
    # Question by question, every setting, so a stopped run still compares them on the same questions.
    for n, q in enumerate(asked, start=1):
        for name in names:
            cfg = cfgs[name]
            t0 = time.perf_counter()
            queries = plan_for(q, chat, cfg)
            searcher = answering_searcher(retriever, cfg.retrieval, chat)
            context = searcher.search(queries, search_config(q, cfg.retrieval))
            (pred,) = answer_runs(q, queries, searcher, chat, cfg, [0], first_context=context)
            preds[name][q.id] = pred.answer
            seconds[name] += time.perf_counter() - t0
            print(
                f"  {q.id} {name} ({detect_type(q)}): {pred.answer.answer_value} {list(pred.answer.ref_id)} "
                f"attempts {pred.attempts} k {pred.k_used}",
                file=sys.stderr,
                flush=True,
            )
        print_running_scores(asked[:n], preds, seconds, known)


if __name__ == "__main__":
    main()
