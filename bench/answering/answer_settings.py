"""Answering settings against the previous default, with the bundled LLM, in one run.

Each setting is the default QAConfig with some [generation] keys changed; the first row is
the previous default (every document the reply lists is cited), the
same-run baseline. (A schema that admitted only a number or a "[low,high]" range for
questions with a unit was tried here and dropped: 0.646 -> 0.609, the model wrote ranges as
"80" or "300,1000".) On WattBot train, question by question (running totals, so a stopped
run still compares like with like), one run each, planner on:
  previous default   cite = "reply" (every document the reply lists)
  default            cite = "source" (one document: the first listed that states the value)
  + quote all        every reply first copies a context sentence (quote_evidence = "all")
Settings that send the same prompt share its reply through the cache under --work (cite only
changes what is kept of a reply), so the baseline costs no extra call. Then each question
whose score differs between settings.

    python bench/answering/answer_settings.py --lake LAKE [--limit N] [--settings a,b] [--work DIR] [--models DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.retrieval.methods import bundled_chat  # noqa: E402
from bench.retrieval.retrieval_eval import print_running_scores  # noqa: E402
from kohaku_rag.answering.answer import answer_runs, plan_for  # noqa: E402
from kohaku_rag.answering.qa_config import QAConfig  # noqa: E402
from kohaku_rag.answering.qa_tables import corpus_ids  # noqa: E402
from kohaku_rag.answering.searcher import answering_searcher  # noqa: E402
from kohaku_rag.answers.question_files import load_questions  # noqa: E402
from kohaku_rag.answers.records import Answer  # noqa: E402
from kohaku_rag.evaluation.wattbot2025 import score_question  # noqa: E402
from kohaku_rag.indexing.index_config import recorded_index_config  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402
from kohaku_rag.retrieval.retriever import open_retriever  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SETTINGS: dict[str, dict[str, Any]] = {
    "previous default": {"cite": "reply"},
    "default": {},
    "+ quote all": {"quote_evidence": "all"},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", type=Path, required=True, help="a lake with the WattBot index built")
    parser.add_argument("--wattbot", type=Path, default=REPO.parent / "shared" / "wattbot")
    parser.add_argument("--limit", type=int, default=0, help="only the first N questions (0: all)")
    parser.add_argument("--settings", default="", help="comma-separated names (default: all)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kohaku_answer_settings"), help="LLM reply cache")
    parser.add_argument("--models", type=Path, default=REPO / ".models")
    args = parser.parse_args()

    names = args.settings.split(",") if args.settings else list(SETTINGS)
    base = QAConfig(questions=str(args.wattbot / "train_QA.csv"))
    configs = {n: replace(base, generation=replace(base.generation, **SETTINGS[n])) for n in names}
    questions = load_questions(args.wattbot / "train_QA.csv")
    questions = questions[: args.limit] if args.limit else questions
    lake = Lake(args.lake)
    known = corpus_ids(lake)
    retriever = open_retriever(lake, recorded_index_config(lake))
    chat = bundled_chat(args)
    searcher = answering_searcher(retriever, base.retrieval, chat)  # retrieval is the same for all

    preds: dict[str, dict[str, Answer]] = {n: {} for n in names}
    seconds = dict.fromkeys(names, 0.0)
    width = max(map(len, names))
    print(f"{len(questions)} train questions, bundled LLM, 1 run each (running totals)")
    print(f"{'after':<6} {'setting':<{width}} {'final':>6} {'value':>6} {'ref':>6} {'na':>6} {'s/q':>5}")
    for n, q in enumerate(questions, start=1):
        queries = plan_for(q, chat, base)
        for name, cfg in configs.items():
            t0 = time.perf_counter()
            (pred,) = answer_runs(q, queries, searcher, chat, cfg, [0])
            preds[name][q.id] = pred.answer
            seconds[name] += time.perf_counter() - t0
        print_running_scores(questions[:n], preds, seconds, known, width=width)

    print("\nQuestions whose score differs (final score; value and refs)")
    for q in questions:
        scores = {n: score_question(q, preds[n][q.id], known).total for n in names}
        if len(set(scores.values())) > 1:
            cells = "  ".join(
                f"{n}: {scores[n]:.2f} {preds[n][q.id].answer_value!r} {list(preds[n][q.id].ref_id)}" for n in names
            )
            gold = q.gold
            print(f"{q.id} gold {gold.answer_value if gold else '?'!r} {list(gold.ref_id) if gold else []} | {cells}")
    print(f"\nLLM calls: {chat.misses} made, {chat.hits} from the cache")


if __name__ == "__main__":
    main()
