"""WattBot score of the answering pipeline with the embedded LLM, against a naive baseline.

In one run, question by question (so partial results are comparable when stopped early):
  naive     the question alone, flat BM25 over 800-character chunks of the WattBot text,
            one run, no planner, no retries, no evidence quote, the reply's own true/false
            verdict, the same LLM, prompt and context budget (plain RAG);
  kohaku    the default QAConfig (planner, hybrid hierarchical retrieval, combined_max rerank,
            evidence sentences marked, context before question, is_blank retries, a verbatim
            evidence quote before true/false verdicts, the verdict from the model's
            probabilities), 5 runs
            that differ only by seed:
            run 0 alone is the single-run score, runs 0-2 and 0-4 voted are the ensembles.
Seconds per question: baseline and single = planner + retrieval + LLM time of run 0; an
ensemble adds its extra runs' LLM time (they share the prompt's KV cache). Then everything
is asked again through the response cache and the LLM calls it saved are counted.

    python bench/answering/qa_wattbot.py --lake LAKE [--limit N] [--skip N] [--runs M] [--work DIR]
                               [--true-false-only] [--quote-evidence off|true_false|all]
                               [--true-false-verdict probability|reply]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.indexing.index_wattbot import flat_baseline  # noqa: E402
from kohaku_rag.answering.answer import answer_runs, plan_for  # noqa: E402
from kohaku_rag.answering.prompt import is_true_false  # noqa: E402
from kohaku_rag.answering.qa_config import QUOTE_EVIDENCE, TRUE_FALSE_VERDICTS, GenerationPart, QAConfig, RetrievalPart  # noqa: E402
from kohaku_rag.answering.qa_tables import corpus_ids  # noqa: E402
from kohaku_rag.answers.question_files import load_questions  # noqa: E402
from kohaku_rag.answers.records import Answer  # noqa: E402
from kohaku_rag.answers.vote import vote  # noqa: E402
from kohaku_rag.evaluation.wattbot2025 import score_predictions  # noqa: E402
from kohaku_rag.indexing.index_config import IndexConfig  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402
from kohaku_rag.llm import CachedChat  # noqa: E402
from kohaku_rag.llm.llama import LlamaCppChat  # noqa: E402
from kohaku_rag.llm.model_files import ensure_bundled_model  # noqa: E402
from kohaku_rag.retrieval.context import ContextItem, pack  # noqa: E402
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig  # noqa: E402
from kohaku_rag.retrieval.retriever import open_retriever  # noqa: E402
from kohaku_rag.stores.bm25 import BM25Index  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


class FlatSearcher:
    """The naive baseline: BM25 over flat chunks, packed into the same character budget."""

    def __init__(self, bm25: BM25Index, texts: dict[str, str]) -> None:
        self.bm25, self.texts = bm25, texts

    def search(self, queries, cfg: RetrievalConfig) -> list[ContextItem]:
        hits = self.bm25.search(queries[0], cfg.top_k_final)
        items = [
            ContextItem(node_id.split(":")[0], node_id, "chunk", None, score, self.texts[node_id])
            for node_id, score in hits
        ]
        return pack(items, cfg.budget_chars)


@dataclass
class System:
    name: str
    known_ids: list[str]  # the corpus ids, so typo'd reference ids resolve as in `kohaku eval`
    preds: dict[str, Answer] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)

    def line(self, gold) -> str:
        asked = [q for q in gold if q.id in self.preds]
        if not asked:
            return f"{self.name:<14} (nothing yet)"
        r = score_predictions(asked, self.preds, self.known_ids)
        return (
            f"{self.name:<14} n={len(asked):>3} final={r.final:.3f} value={r.value:.3f} ref={r.ref:.3f} "
            f"na={r.na:.3f}  s/question={sum(self.seconds) / len(self.seconds):6.1f}"
        )


def _rounded(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def report(systems: list[System], gold, title: str) -> None:
    print(f"\n== {title}", flush=True)
    for s in systems:
        print(s.line(gold), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", type=Path, required=True, help="a lake with the WattBot index built")
    parser.add_argument("--wattbot", type=Path, default=REPO.parent / "shared" / "wattbot")
    parser.add_argument("--limit", type=int, default=0, help="only the first N questions (0: all)")
    parser.add_argument("--skip", type=int, default=0, help="leave out the first N questions (to extend a run)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/qa_bench"), help="response cache (emptied first)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--quote-evidence",
        choices=QUOTE_EVIDENCE,
        default=GenerationPart.quote_evidence,
        help="kohaku's quote_evidence (an ablation; the naive baseline never quotes)",
    )
    parser.add_argument(
        "--true-false-verdict",
        choices=TRUE_FALSE_VERDICTS,
        default=GenerationPart.true_false_verdict,
        help="kohaku's true_false_verdict (an ablation)",
    )
    parser.add_argument("--true-false-only", action="store_true", help="only the True/False statements")
    args = parser.parse_args()

    questions = load_questions(args.wattbot / "train_QA.csv")[args.skip :]
    if args.true_false_only:
        questions = [q for q in questions if is_true_false(q)]
    if args.limit:
        questions = questions[: args.limit]
    shutil.rmtree(args.work / "llm", ignore_errors=True)
    model = ensure_bundled_model(REPO / ".models")
    inner = LlamaCppChat(model, n_ctx=4096, n_threads=args.threads)

    kohaku_cfg = QAConfig(questions=str(args.wattbot / "train_QA.csv"))
    kohaku_cfg = replace(
        kohaku_cfg,
        generation=replace(
            kohaku_cfg.generation, quote_evidence=args.quote_evidence, true_false_verdict=args.true_false_verdict
        ),
    )
    naive_cfg = replace(
        kohaku_cfg,
        retrieval=RetrievalPart(use_planner=False, search=kohaku_cfg.retrieval.search),
        generation=replace(kohaku_cfg.generation, max_retries=0, quote_evidence="off", true_false_verdict="reply"),
    )
    assert isinstance(naive_cfg.generation, GenerationPart)
    retriever = open_retriever(Lake(args.lake), IndexConfig())
    known = corpus_ids(Lake(args.lake))
    flat = FlatSearcher(*flat_baseline(args.wattbot))
    print(
        f"{len(questions)} questions; model {model.name}, {inner.n_threads} threads; "
        f"context budget {kohaku_cfg.retrieval.search.budget_chars} chars; runs {args.runs}; "
        f"kohaku quote_evidence {args.quote_evidence}, true_false_verdict {args.true_false_verdict}",
        flush=True,
    )

    def one_pass(chat: CachedChat, verbose: bool) -> list[System]:
        naive, single = System("naive BM25", known), System("kohaku m=1", known)
        ensembles = {m: System(f"kohaku m={m}", known) for m in (3, 5) if m <= args.runs}
        systems = [naive, single, *ensembles.values()]
        for n, q in enumerate(questions, start=1):
            t0 = time.perf_counter()
            (base,) = answer_runs(q, [q.question], flat, chat, naive_cfg, [0])
            naive.preds[q.id] = base.answer
            naive.seconds.append(time.perf_counter() - t0)

            t0 = time.perf_counter()
            queries = plan_for(q, chat, kohaku_cfg)
            context = retriever.search(queries, kohaku_cfg.retrieval.search)
            shared = time.perf_counter() - t0
            runs = answer_runs(q, queries, retriever, chat, kohaku_cfg, list(range(args.runs)), context)
            single.preds[q.id] = runs[0].answer
            single.seconds.append(shared + runs[0].seconds)
            for m, system in ensembles.items():
                system.preds[q.id] = vote(
                    [r.answer for r in runs[:m]],
                    kohaku_cfg.voting.mode,
                    kohaku_cfg.voting.ignore_blank,
                    kohaku_cfg.voting.tiebreak,
                )
                system.seconds.append(shared + sum(r.seconds for r in runs[:m]))
            if verbose:
                gold = q.gold
                print(
                    f"[{n}/{len(questions)}] {q.id} gold={gold.answer_value if gold else '?'} "
                    f"{list(gold.ref_id) if gold else ''} | naive={base.answer.answer_value} {list(base.answer.ref_id)} "
                    f"{naive.seconds[-1]:.0f}s | kohaku={[r.answer.answer_value for r in runs]} "
                    f"{list(runs[0].answer.ref_id)} k={runs[0].k_used} attempts={runs[0].attempts} "
                    f"{single.seconds[-1]:.0f}s (+{sum(r.seconds for r in runs[1:]):.0f}s for runs 1-{len(runs) - 1}) "
                    f"queries={list(queries[1:])}"
                    + (f" verdict_logodds={_rounded(runs[0].verdict_logodds)}" if is_true_false(q) else ""),
                    flush=True,
                )
                report(systems, questions, f"after {n} questions")
        return systems

    first = CachedChat(inner, args.work / "llm")
    started = time.perf_counter()
    systems = one_pass(first, verbose=True)
    report(systems, questions, f"first pass: {first.misses} LLM calls in {time.perf_counter() - started:.0f}s")
    print("\n== errors (the paper's taxonomy), per system", flush=True)
    for system in systems:
        asked = [q for q in questions if q.id in system.preds]
        print(
            f"{system.name:<14} {score_predictions(asked, system.preds, system.known_ids).error_counts()}", flush=True
        )

    second = CachedChat(inner, args.work / "llm")
    started = time.perf_counter()
    again = one_pass(second, verbose=False)
    same = all(a.preds == b.preds for a, b in zip(systems, again, strict=True))
    print(
        f"\n== second pass through the response cache: {second.hits} of {second.hits + second.misses} "
        f"LLM calls saved ({second.misses} made), {time.perf_counter() - started:.1f}s, "
        f"identical answers: {same}",
        flush=True,
    )


if __name__ == "__main__":
    main()
