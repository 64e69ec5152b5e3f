"""What the answering prompt's context holds, per evidence flag, with no LLM (issue 41: rows
as records are longer, and the budget stays in characters): the share of train + dev
questions whose context (the default retrieval, `budget_chars`) contains a gold document, and
the share whose context states the gold value (as a whole number or word), with the context's
characters and the search time. Run it once per side, each with its own code, on its own lake:

    PYTHONPATH=<main worktree> python bench/retrieval/table_context.py --lake BASE --corpus DIR --questions td_QA.csv
    python bench/retrieval/table_context.py --lake NEW --corpus DIR --questions td_QA.csv
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from kohaku_assets.resources import KohakuSettings  # noqa: E402
from kohaku_rag.answers.question_files import load_questions  # noqa: E402
from kohaku_rag.retrieval.retrieval_config import RetrievalConfig  # noqa: E402
from kohaku_rag.retrieval.retriever import open_retriever  # noqa: E402


def states(text: str, value: str) -> bool:
    """The value as a whole number or word in the text, with or without thousands commas."""
    if not value or value == "is_blank":
        return False
    forms = {value}
    if re.fullmatch(r"\d+(\.\d+)?", value):
        whole, _, frac = value.partition(".")
        forms.add(f"{int(whole):,}" + (f".{frac}" if frac else ""))
    return any(re.search(rf"(?<![\w.]){re.escape(f)}(?![\w]|\.\d)", text) for f in forms)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lake", type=Path, required=True)
    ap.add_argument("--corpus", type=Path, required=True)
    ap.add_argument("--questions", type=Path, required=True)
    args = ap.parse_args()
    settings = KohakuSettings(lake_root=str(args.lake), corpus_dir=str(args.corpus))
    retriever = open_retriever(settings.lake, settings.index_config())
    cfg = RetrievalConfig()
    tally: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # questions, gold doc in, value in
    chars: list[int] = []
    started = time.perf_counter()
    questions = [q for q in load_questions(args.questions) if q.gold is not None and not q.gold.is_blank]
    for q in questions:
        items = retriever.search([q.question], cfg)
        text = "\n".join(i.text for i in items)
        chars.append(len(text))
        assert q.gold is not None
        gold_doc = bool(set(q.gold.ref_id) & {i.doc_id for i in items})
        value_in = states(text, q.gold.answer_value)
        for flag in ("all", *q.flags):
            t = tally[flag]
            t[0] += 1
            t[1] += gold_doc
            t[2] += value_in
    seconds = (time.perf_counter() - started) / max(1, len(questions))
    print(f"{args.lake}: {len(questions)} answerable questions, {sum(chars) / len(chars):.0f} context chars, "
          f"{seconds:.2f} s per search")  # fmt: skip
    print("| flag | n | gold document in context | gold value in context |")
    print("|---|---|---|---|")
    for flag, (n, doc, val) in sorted(tally.items(), key=lambda kv: (kv[0] != "all", kv[0])):
        print(f"| {flag} | {n} | {doc}/{n} | {val}/{n} |")


if __name__ == "__main__":
    main()
