"""How much of a question's prompts could a KV prefix cache skip? (no generation)

Builds, for each question, the prompts `kohaku ask` sends the bundled model with the default
config (the planner's, then the answer's over the context retrieved for the question),
tokenizes them with the bundled model's own chat template, and counts the tokens each
prompt shares with the longest-matching earlier prompt: what a RAM cache of evaluated
prefixes (llama.cpp's state per prefix) would not have to evaluate again. Prefill is almost
all of the time to answer on a CPU, so this share bounds what prefix reuse can save.

    python bench/answering/prompt_prefixes.py --lake LAKE [--questions ../shared/wattbot/train_QA.csv] [--n 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import kohaku_rag as kr  # noqa: E402
from kohaku_rag.answering.answer import answering_request  # noqa: E402
from kohaku_rag.answering.planner import plan_request  # noqa: E402
from kohaku_rag.answering.qa_config import QAConfig  # noqa: E402
from kohaku_rag.answers.question_files import load_questions  # noqa: E402
from kohaku_rag.llm.llama import LlamaCppChat  # noqa: E402


def shared(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lake", required=True)
    parser.add_argument("--questions", default=str(ROOT.parent / "shared" / "wattbot" / "train_QA.csv"))
    parser.add_argument("--n", type=int, default=20)
    args = parser.parse_args()
    rag = kr.open(args.lake)
    cfg = QAConfig()
    chat = rag.models.chat(cfg.generation.llm, rag.lake)
    inner = getattr(chat, "inner", chat)
    assert isinstance(inner, LlamaCppChat), f"the default config's model is not the bundled one: {inner!r}"
    questions = load_questions(Path(args.questions), require_unit=False)[: args.n]
    seen: list[list[int]] = []
    rows = {"planner": [], "answer": []}
    for q in questions:
        items = rag.search(q.question, config=cfg.retrieval.search)
        for kind, req in (
            ("planner", plan_request(q.question, cfg.retrieval.planner_max_queries)),
            ("answer", answering_request(q, items, cfg.generation, seed=0)),
        ):
            tokens = inner._tokens(req.messages)  # noqa: SLF001 - the model's own template
            best = max((shared(tokens, s) for s in seen), default=0)
            previous = shared(tokens, seen[-1]) if seen else 0
            rows[kind].append((len(tokens), best, previous))
            seen.append(tokens)
    for kind, values in rows.items():
        total = sum(v[0] for v in values)
        print(
            json.dumps(
                {
                    "prompt": kind,
                    "questions": len(values),
                    "mean_tokens": round(statistics.mean(v[0] for v in values), 1),
                    "mean_shared_with_best_earlier": round(statistics.mean(v[1] for v in values), 1),
                    "mean_shared_with_previous_call": round(statistics.mean(v[2] for v in values), 1),
                    "share_skippable": round(sum(v[1] for v in values) / total, 4) if total else None,
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
