"""Scoring a config's voted answers against the gold ones: the score rows stored in
`qa/scores/`, accuracy per answer type, and the worst-scored questions as a table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from kohaku_rag.answering.qa_config import DEFAULT_METRIC
from kohaku_rag.answers.normalise import parse_value
from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.evaluation.metrics import MetricReport, score_with


def gold_kind(question: Question) -> str:
    assert question.gold is not None
    if question.gold.is_blank:
        return "blank"
    # True/False gold is written 1/0 in answer_value; its answer column says TRUE/FALSE.
    as_answer = parse_value(question.gold.answer).kind
    return "boolean" if as_answer == "boolean" else parse_value(question.gold.answer_value, question.answer_unit).kind


def score_rows(report: MetricReport, questions: Sequence[Question], answers: dict[str, Answer]) -> list[dict[str, Any]]:
    by_id = {q.id: q for q in questions}
    rows = []
    for r in report.rows:
        q, a = by_id[r.id], answers.get(r.id)
        assert q.gold is not None
        rows.append(
            {
                **r.as_dict(),
                "type": gold_kind(q),
                "metric": report.metric,
                "gold_value": q.gold.answer_value,
                "gold_ref": list(q.gold.ref_id),
                "pred_value": a.answer_value if a else "",
                "pred_ref": list(a.ref_id) if a else [],
                "question": q.question,
            }
        )
    return rows


def per_type_accuracy(rows: Sequence[dict[str, Any]]) -> dict[str, float]:
    totals: Counter[str] = Counter()
    right: Counter[str] = Counter()
    for row in rows:
        totals[row["type"]] += 1
        right[row["type"]] += row["value"]
    return {kind: round(right[kind] / totals[kind], 4) for kind in sorted(totals)}


def worst_table(rows: Sequence[dict[str, Any]], limit: int = 8) -> str:
    def cell(value: object) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")[:60]

    lines = ["| id | score | error | gold | predicted | question |", "|---|---|---|---|---|---|"]
    for row in sorted(rows, key=lambda r: (r["total"], r["id"]))[:limit]:
        lines.append(
            f"| {row['id']} | {row['total']:.2f} | {row['error_type']} | {cell(row['gold_value'])} "
            f"{cell(row['gold_ref'])} | {cell(row['pred_value'])} {cell(row['pred_ref'])} | {cell(row['question'])} |"
        )
    return "\n".join(lines)


def score_answers(
    questions: Sequence[Question],
    answers: dict[str, Answer],
    known_ref_ids: Sequence[str] | None = None,
    metric: str = DEFAULT_METRIC,
) -> tuple[MetricReport, list[dict[str, Any]]] | None:
    """Score what has gold answers under `metric`; `known_ref_ids` (the corpus ids) resolves
    typo'd ids (2025 metric only; the 2026 metric compares ids as written)."""
    gold = [q for q in questions if q.gold is not None]
    if not gold:
        return None
    report = score_with(metric, gold, answers, known_ref_ids or None)
    return report, score_rows(report, gold, answers)
