"""Issue 25's retrieval levers on WattBot train, in one run, against the same-run default.

One row per setting, each lever alone on top of the default retrieval, then combinations:
gold-document MRR, R@1, evidence recall at 4,000 and 8,000 context characters (each
setting's own packing: whole paragraphs or sentence windows) and ms per query (search and
packing), with the question alone (no LLM; bench/retrieval/retrieval_eval.py).

    python bench/retrieval/evidence_levers.py --lake LAKE [--corpus DIR] [--only 'NAME|NAME']

`--llm N` then answers the first N train questions with the bundled LLM for the default
QA config and each config named by `--llm-configs` (QA config files), question by question,
printing running WattBot scores, value accuracy, the false-answer rate (an answer where the
gold is blank or a wrong value) and the false-refusal rate (a blank where the gold has a
value), then every question whose value flipped between the first config and the others.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.retrieval.retrieval_eval import Metrics, evaluate, load_gold  # noqa: E402
from kohaku_rag.answering.answer import answer_runs, plan_for  # noqa: E402
from kohaku_rag.answering.compute import Working  # noqa: E402
from kohaku_rag.answering.prediction import Prediction  # noqa: E402
from kohaku_rag.answering.qa_config import QAConfig  # noqa: E402
from kohaku_rag.answering.qa_config_file import load_qa_config  # noqa: E402
from kohaku_rag.answering.qa_tables import corpus_ids  # noqa: E402
from kohaku_rag.answering.searcher import answering_searcher  # noqa: E402
from kohaku_rag.answers.question_files import load_questions  # noqa: E402
from kohaku_rag.answers.records import Answer  # noqa: E402
from kohaku_rag.evaluation.wattbot2025 import score_predictions  # noqa: E402
from kohaku_rag.indexing.index_config import recorded_index_config  # noqa: E402
from kohaku_rag.lake.layout import Lake  # noqa: E402
from kohaku_rag.llm import CachedChat  # noqa: E402
from kohaku_rag.llm.llama import LlamaCppChat  # noqa: E402
from kohaku_rag.llm.model_files import ensure_bundled_model  # noqa: E402
from kohaku_rag.retrieval.context import ContextItem  # noqa: E402
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig  # noqa: E402
from kohaku_rag.retrieval.retriever import Retriever, open_retriever  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
BUDGETS = (2000, 4000, 8000)  # 2,000: evidence per character, where windows should show
WINDOWS = {"pack": "windows"}
SETTINGS: dict[str, dict[str, object]] = {
    "default": {},
    "windows (2 best, ±1)": WINDOWS,
    "windows (3 best, ±1)": {**WINDOWS, "window_sentences": 3},
    "windows (2 best, ±2)": {**WINDOWS, "window_neighbours": 2},
    "windows, 32 units": {**WINDOWS, "top_k_final": 32},
    "field (title/section) 0.3": {"field_weight": 0.3},
    "field (title/section) 1.0": {"field_weight": 1.0},
    "passages 256/64, w 0.5": {"passage_weight": 0.5},
    "passages 256/64, w 1.0": {"passage_weight": 1.0},
    "passages 256/64, w 1.5": {"passage_weight": 1.5},
    "passages 128/32, w 1.0": {"passage_weight": 1.0, "passage_tokens": 128, "passage_overlap": 32},
    "RM3 10 terms, 10 docs": {"rm3_terms": 10},
    "RM3 20 terms, 5 docs, 0.7": {"rm3_terms": 20, "rm3_docs": 5, "rm3_query_weight": 0.7},
    "passages 1.0 + windows": {**WINDOWS, "passage_weight": 1.0},
    "passages 1.0 + windows, 24 units": {**WINDOWS, "passage_weight": 1.0, "top_k_final": 24},
    "passages 1.0 + field 0.3": {"passage_weight": 1.0, "field_weight": 0.3},
    "passages 1.0 + RM3 10": {"passage_weight": 1.0, "rm3_terms": 10},
}


def measure(retriever: Retriever, gold: list, cfg: RetrievalConfig) -> Metrics:  # type: ignore[type-arg]
    """Search wide (no budget, whole paragraphs), pack to each budget as `cfg` packs."""
    wide = replace(cfg, budget_chars=10**9, mark_sentences=0, pack="paragraphs")

    def packer(question: str, items: list[ContextItem], budget: int) -> list[ContextItem]:
        return retriever.context.pack(question, items, replace(cfg, budget_chars=budget, mark_sentences=0))

    retriever.search(["warm-up"], wide)
    retriever.context.pack("warm-up", retriever.search(["warm-up"], wide), cfg)  # builds any in-memory index
    return evaluate(gold, lambda q: retriever.search([q], wide), BUDGETS, packer)


def row(name: str, m: Metrics) -> str:
    return (
        f"{name:<32} {m.mrr:6.3f} {m.recall_at_1:6.3f} {m.evidence[2000]:6.3f} {m.evidence[4000]:6.3f} "
        f"{m.evidence[8000]:6.3f} "
        f"{1000 * m.seconds_per_query:6.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", type=Path, required=True, help="a lake with the WattBot index built")
    parser.add_argument("--wattbot", type=Path, default=REPO.parent / "shared" / "wattbot")
    parser.add_argument("--only", default="", help="setting names separated by | (default: all)")
    parser.add_argument("--llm", type=int, default=0, help="train questions answered with the bundled LLM")
    parser.add_argument("--llm-configs", default="", help="comma-separated QA config files compared to the default")
    parser.add_argument("--work", type=Path, default=Path("/tmp/kohaku-bench-25/work"), help="LLM reply cache")
    parser.add_argument("--models", type=Path, default=REPO / ".models", help="where the bundled GGUF is")
    args = parser.parse_args()

    gold = load_gold(args.wattbot / "train_QA.csv")
    lake = Lake(args.lake)
    index_cfg = recorded_index_config(lake)
    if index_cfg is None:
        raise SystemExit(f"{lake.root}: no index_config.json; index the corpus first")
    retriever = open_retriever(lake, index_cfg)
    names = [n for n in args.only.split("|") if n] or list(SETTINGS)
    header = f"{'setting':<32} {'MRR':>6} {'R@1':>6} {'ev@2K':>6} {'ev@4K':>6} {'ev@8K':>6} {'ms/q':>6}"
    print(f"{len(gold)} train questions with a gold document; question alone, no LLM\n\n{header}\n" + "-" * len(header))
    for name in names if args.llm == 0 or args.only else []:
        cfg = replace(RetrievalConfig(), **SETTINGS[name])  # type: ignore[arg-type]
        print(row(name, measure(retriever, gold, cfg)), flush=True)
    if args.llm > 0:
        configs = {"default": QAConfig()} | {
            Path(p).stem: load_qa_config(Path(p)) for p in args.llm_configs.split(",") if p
        }
        llm_rows(args, lake, retriever, configs)


def llm_rows(args: argparse.Namespace, lake: Lake, retriever: Retriever, configs: dict[str, QAConfig]) -> None:
    chat = CachedChat(LlamaCppChat(ensure_bundled_model(args.models), n_ctx=4096), args.work / "llm")
    questions = load_questions(args.wattbot / "train_QA.csv")[: args.llm]
    known = corpus_ids(lake)
    preds: dict[str, dict[str, Prediction]] = {n: {} for n in configs}
    seconds = dict.fromkeys(configs, 0.0)
    print(f"\nbundled LLM, 1 run, first {len(questions)} train questions (running totals)")
    print(
        f"{'after':<6} {'config':<17} {'final':>6} {'value':>6} {'ref':>6} {'na':>6} {'f-ans':>6} {'f-ref':>6} {'s/q':>5}"
    )
    for n, q in enumerate(questions, start=1):
        for name, cfg in configs.items():
            t0 = time.perf_counter()
            searcher = answering_searcher(retriever, cfg.retrieval, chat)
            (pred,) = answer_runs(q, plan_for(q, chat, cfg), searcher, chat, cfg, [0])
            preds[name][q.id] = pred
            seconds[name] += time.perf_counter() - t0
            rows = {name: {k: p.answer for k, p in preds[name].items()}}
            if cfg.generation.compute == "expression" and cfg.generation.abstain == "off":
                # abstain = "unfounded", read off the same run (no deeper retry after it)
                rows[f"{name}/abstain"] = {k: unfounded_blank(p) for k, p in preds[name].items()}
            for label, answers in rows.items():
                r = score_predictions(questions[:n], answers, known)
                fa, fr = false_rates(questions[:n], answers)
                print(
                    f"{n:<6} {label:<17} {r.final:6.3f} {r.value:6.3f} {r.ref:6.3f} {r.na:6.3f} {fa:6.3f} {fr:6.3f} "
                    f"{seconds[name] / n:5.0f}",
                    flush=True,
                )
        for name in list(configs)[1:]:
            a, b = preds["default"][q.id], preds[name][q.id]
            va, vb = value_right(q, a.answer), value_right(q, b.answer)
            if va != vb or a.answer.answer_value != b.answer.answer_value:
                working = Working.from_json(b.working)
                print(
                    f"  {q.id} {name}: {a.answer.answer_value!r} ({'right' if va else 'wrong'}) -> "
                    f"{b.answer.answer_value!r} ({'right' if vb else 'wrong'}); gold "
                    f"{q.gold.answer_value if q.gold else '?'!r}{'; ' + working.describe() if working else ''}",
                    flush=True,
                )


def unfounded_blank(p: Prediction) -> Answer:
    """The prediction's answer, or a blank when its working's operands are not all stated."""
    working = Working.from_json(p.working)
    if working is not None and not working.founded and not p.answer.is_blank:
        return Answer.blank(p.answer.answer_unit)
    return p.answer


def value_right(q, answer: Answer) -> bool:  # type: ignore[no-untyped-def]
    return score_predictions([q], {q.id: answer}, set()).value == 1.0


def false_rates(questions, answers: dict[str, Answer]) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """False answers (an answer with a wrong value, or where the gold is blank) and false
    refusals (a blank where the gold has a value), each over all questions."""
    wrong = refused = 0
    for q in questions:
        a = answers.get(q.id)
        if a is None or q.gold is None:
            continue
        if a.is_blank and not q.gold.is_blank:
            refused += 1
        elif not a.is_blank and not value_right(q, a):
            wrong += 1
    n = max(len(questions), 1)
    return wrong / n, refused / n


if __name__ == "__main__":
    main()
