"""Retrieval metrics on WattBot-format questions: gold-document ranks and evidence recall.

Used by bench/indexing/index_wattbot.py; importable so the flat-chunk baseline and the hierarchical
retriever are measured by the same code.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.evaluation.wattbot2025 import score_predictions
from kohaku_rag.retrieval.context import ContextItem, pack

_QUOTED = re.compile(r"[\"“”']([^\"“”']{12,})[\"“”']")
_LOCATOR = re.compile(r"^\s*(table|figure|fig\.?|section)\s*[\w.]+(\s*(and|,)\s*(table|figure)?\s*[\w.]+)*\s*$", re.I)
_ELLIPSIS = re.compile(r"…|\.\.\.")
_HYPHEN_BREAK = re.compile(r"([a-z])-\s+([a-z])")
_NON_WORD = re.compile(r"[^0-9a-z]+")


@dataclass(frozen=True)
class GoldQuestion:
    id: str
    question: str
    refs: tuple[str, ...]
    evidence: tuple[str, ...]  # normalised quote fragments; empty when the gold is only a locator


def normalise(text: str) -> str:
    text = _HYPHEN_BREAK.sub(r"\1\2", text.lower())
    return " ".join(_NON_WORD.sub(" ", text).split())


def evidence_fragments(supporting: str) -> tuple[str, ...]:
    if not supporting or supporting == "is_blank" or _LOCATOR.match(supporting):
        return ()
    quoted = _QUOTED.findall(supporting)
    body = (
        " ".join(quoted)
        if quoted
        else supporting.split(":", 1)[-1]
        if re.match(r"^\s*(section|table|figure)", supporting, re.I)
        else supporting
    )
    fragments = [normalise(f) for f in _ELLIPSIS.split(body)]
    return tuple(f for f in fragments if len(f.split()) >= 3)


def load_gold(path: Path) -> list[GoldQuestion]:
    with path.open(encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = []
    for r in rows:
        refs = tuple(re.findall(r"[A-Za-z]+\d{4}[a-z]?", r.get("ref_id", "")))
        if not refs:
            continue  # unanswerable questions have no gold document
        out.append(GoldQuestion(r["id"], r["question"], refs, evidence_fragments(r.get("supporting_materials", ""))))
    return out


def doc_ranking(items: Sequence[ContextItem]) -> list[str]:
    seen: list[str] = []
    for item in items:
        if item.doc_id not in seen:
            seen.append(item.doc_id)
    return seen


def _trigrams(text: str) -> set[tuple[str, ...]]:
    words = text.split()
    return {tuple(words[i : i + 3]) for i in range(len(words) - 2)}


def evidence_found(q: GoldQuestion, items: Sequence[ContextItem]) -> bool:
    """Found when at least half of the quote's word trigrams appear, after normalisation,
    in the context. Trigrams rather than the whole quote, because gold quotes are often
    trimmed, re-punctuated or taken from another version of the paper."""
    wanted = set().union(*(_trigrams(f) for f in q.evidence))
    if not wanted:
        return False
    have = _trigrams(normalise(" \n ".join(i.text for i in items)))
    return len(wanted & have) * 2 >= len(wanted)


@dataclass
class Metrics:
    recall_at_1: float
    recall_at_5: float
    mrr: float
    evidence: dict[int, float]
    n_questions: int
    n_evidence: int
    seconds_per_query: float

    def row(self, name: str) -> str:
        ev = "  ".join(f"ev@{b}={v:.3f}" for b, v in sorted(self.evidence.items()))
        return (
            f"{name:<28} R@1={self.recall_at_1:.3f}  R@5={self.recall_at_5:.3f}  MRR={self.mrr:.3f}  {ev}"
            f"  ({self.n_questions} q, {self.n_evidence} with quotes, {1000 * self.seconds_per_query:.0f} ms/q)"
        )


def evaluate(
    questions: Sequence[GoldQuestion],
    ranked: Callable[[str], list[ContextItem]],
    budgets: Sequence[int],
    packer: Callable[[str, list[ContextItem], int], list[ContextItem]] | None = None,
) -> Metrics:
    """`ranked(question)` returns the full ranked context before the budget cut;
    `packer(question, items, budget)` packs it (default: whole units in rank order)."""
    import time

    r1 = r5 = mrr = 0.0
    found = dict.fromkeys(budgets, 0)
    with_quotes = [q for q in questions if q.evidence]
    started = time.perf_counter()
    for q in questions:
        items = ranked(q.question)
        docs = doc_ranking(items)
        gold = set(q.refs)
        r1 += len(gold & set(docs[:1])) / len(gold)
        r5 += len(gold & set(docs[:5])) / len(gold)
        rank = next((i for i, d in enumerate(docs, start=1) if d in gold), None)
        mrr += 1.0 / rank if rank else 0.0
        if q.evidence:
            for budget in budgets:
                packed = packer(q.question, items, budget) if packer else pack(items, budget)
                found[budget] += evidence_found(q, packed)
    elapsed = time.perf_counter() - started
    n = max(len(questions), 1)
    return Metrics(
        r1 / n,
        r5 / n,
        mrr / n,
        {b: found[b] / max(len(with_quotes), 1) for b in budgets},
        len(questions),
        len(with_quotes),
        elapsed / n,
    )


def print_running_scores(
    questions: Sequence[Question],
    preds: dict[str, dict[str, Answer]],
    seconds: dict[str, float],
    known: Collection[str],
    width: int = 10,
) -> None:
    """One row per setting: the WattBot score over the questions answered so far (the
    benches answer question by question, so a stopped run still compares like with like)."""
    n = len(questions)
    for name, answers in preds.items():
        r = score_predictions(questions, answers, known)
        print(
            f"{n:<6} {name:<{width}} {r.final:6.3f} {r.value:6.3f} {r.ref:6.3f} {r.na:6.3f} {seconds[name] / n:5.0f}",
            flush=True,
        )
