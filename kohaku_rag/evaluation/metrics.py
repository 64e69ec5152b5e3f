"""The scoring metric as a choice: "wattbot2025" (wattbot2025.py, unchanged) or "wattbot2026"
(wattbot2026.py), behind one `score_with`, and what both report besides their final.

Both give one `ScoredRow` per gold question; `summarise` turns rows into a `MetricReport`,
the same way for a fresh scoring and for rows read back from the lake's score tables.

* final / value / ref / na: the chosen metric's. Both: the mean row total (KohakuRAG's
  FINAL WATTBOT SCORE; the official 2026 scorer's), na the mean over every question (an
  answerable question counts 1), so 2026's final is 0.75 × value + 0.20 × ref + 0.05 × na.
* unit: the share of rows whose answer_unit matches gold's (case and spaces ignored; weight
  0 in both metrics).
* ref_precision / ref_recall / ref_f1: pooled over every row: cited ids that are gold ids
  over all cited ids, over all gold ids, and their harmonic mean (0 when nothing is cited).
* false_answer_rate: of the unanswerable questions, the share given a value (None without
  unanswerable questions); false_refusal_rate: of the answerable questions, the share left
  blank (None without answerable ones), the two ways an abstention policy loses points
  under the 2026 rule; blank_rate: the share of all questions left blank.
* per_flag: when the question file has the 2026 flag columns, per flag the flagged
  questions, how many got the value wrong, and that wrong-rate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kohaku_rag.answering.qa_config import check_metric
from kohaku_rag.answers.normalise import is_blank_value, parse_ref_ids, resolve_ref_ids
from kohaku_rag.answers.records import FLAG_COLUMNS, Answer, Question
from kohaku_rag.evaluation import wattbot2025 as score2025
from kohaku_rag.evaluation import wattbot2026
from kohaku_rag.evaluation.wattbot2025 import ERROR_TYPES, QuestionScore, check_gold


@dataclass(frozen=True)
class ScoredRow:
    """One question scored: the metric's components and what the summaries count."""

    id: str
    value: float
    ref: float
    na: float
    total: float
    error_type: str
    unanswerable: bool
    false_answer: bool
    unit: float
    cited: int
    cited_gold: int
    gold_refs: int
    flags: tuple[str, ...] = ()
    blank: bool = False  # the prediction abstained (value blank)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "value": self.value,
            "ref": self.ref,
            "na": self.na,
            "total": self.total,
            "error_type": self.error_type,
            "unanswerable": self.unanswerable,
            "false_answer": self.false_answer,
            "unit_match": self.unit,
            "cited": self.cited,
            "cited_gold": self.cited_gold,
            "gold_refs": self.gold_refs,
            "flags": list(self.flags),
            "blank": self.blank,
        }

    @classmethod
    def from_dict(cls, row: Mapping[str, Any]) -> ScoredRow:
        """A stored score row; rows written before these columns existed miss the counts."""
        return cls(
            id=str(row["id"]),
            value=float(row["value"]),
            ref=float(row["ref"]),
            na=float(row["na"]),
            total=float(row["total"]),
            error_type=str(row.get("error_type", "")),
            unanswerable=bool(row.get("unanswerable", row.get("type") == "blank")),
            false_answer=bool(row.get("false_answer", False)),
            unit=float(row.get("unit_match", 0.0) or 0.0),
            cited=int(row.get("cited", 0) or 0),
            cited_gold=int(row.get("cited_gold", 0) or 0),
            gold_refs=int(row.get("gold_refs", 0) or 0),
            flags=tuple(row.get("flags") or ()),
            blank=bool(row.get("blank", False)),
        )


@dataclass(frozen=True)
class FlagRate:
    n: int
    wrong: int

    @property
    def wrong_rate(self) -> float:
        return self.wrong / self.n if self.n else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"n": self.n, "wrong": self.wrong, "wrong_rate": round(self.wrong_rate, 4)}


@dataclass(frozen=True)
class MetricReport:
    metric: str
    rows: tuple[ScoredRow, ...]
    final: float
    value: float
    ref: float
    na: float
    unit: float
    ref_precision: float
    ref_recall: float
    ref_f1: float
    unanswerable: int
    false_answer_rate: float | None
    blank_rate: float = 0.0  # the share of all questions the predictions left blank
    false_answers: int = 0  # unanswerable questions given a value
    false_refusals: int = 0  # answerable questions left blank
    per_flag: Mapping[str, FlagRate] = field(default_factory=dict)
    missing: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()

    @property
    def n(self) -> int:
        return len(self.rows)

    @property
    def answerable(self) -> int:
        return self.n - self.unanswerable

    @property
    def false_refusal_rate(self) -> float | None:
        return self.false_refusals / self.answerable if self.answerable else None

    def error_counts(self) -> dict[str, int]:
        counts: Counter[str] = Counter(row.error_type for row in self.rows)
        return {kind: counts.get(kind, 0) for kind in ERROR_TYPES}

    def summary(self) -> dict[str, Any]:
        """The JSON summary: final, value, ref, na, n, per_flag first (`kohaku score --json`)."""
        return {
            "final": round(self.final, 4),
            "value": round(self.value, 4),
            "ref": round(self.ref, 4),
            "na": round(self.na, 4),
            "n": self.n,
            "per_flag": {name: rate.as_dict() for name, rate in self.per_flag.items()},
            "metric": self.metric,
            "unit": round(self.unit, 4),
            "ref_precision": round(self.ref_precision, 4),
            "ref_recall": round(self.ref_recall, 4),
            "ref_f1": round(self.ref_f1, 4),
            "unanswerable": self.unanswerable,
            "false_answer_rate": None if self.false_answer_rate is None else round(self.false_answer_rate, 4),
            "blank_rate": round(self.blank_rate, 4),
            "false_answers": self.false_answers,
            "false_refusals": self.false_refusals,
            "false_refusal_rate": None if self.false_refusal_rate is None else round(self.false_refusal_rate, 4),
            "missing": len(self.missing),
        }

    def lines(self) -> list[str]:
        """The human-readable report (`kohaku score`, `kohaku eval`)."""
        out = [
            f"{self.metric} score {self.final:.4f} (value {self.value:.4f}, ref {self.ref:.4f}, "
            f"na {self.na:.4f}) on {self.n} questions",
            f"  unit match {self.unit:.4f} (weight 0); references: precision {self.ref_precision:.4f}, "
            f"recall {self.ref_recall:.4f}, F1 {self.ref_f1:.4f}",
        ]
        false = f", false-answer rate {self.false_answer_rate or 0.0:.4f}" if self.unanswerable else ""
        out.append(f"  abstained on {self.blank_rate:.4f} of the questions; {self.unanswerable} unanswerable{false}")
        out.append(
            f"  false answers {self.false_answers} of {self.unanswerable} unanswerable; "
            f"false refusals {self.false_refusals} of {self.answerable} answerable"
            + (f" ({self.false_refusal_rate:.4f})" if self.false_refusal_rate is not None else "")
        )
        if self.per_flag:
            out.append("  wrong value by flag: " + ", ".join(
                f"{name} {r.wrong}/{r.n} ({r.wrong_rate:.3f})" for name, r in self.per_flag.items()
            ))  # fmt: skip
        if self.missing:
            out.append(f"  {len(self.missing)} question(s) without a prediction, scored as abstentions")
        return out


def score_with(
    metric: str,
    questions: Sequence[Question],
    preds: Mapping[str, Answer],
    known_ref_ids: Collection[str] | None = None,
) -> MetricReport:
    """Score every gold question under `metric`; a missing prediction is an abstention.

    `known_ref_ids` resolves typo'd ids under wattbot2025 (as `score.score_predictions`
    does); the 2026 metric compares ids as written, as the official scorer does."""
    chosen = check_metric(metric)
    gold = [q for q in questions if q.gold is not None]
    check_gold(gold)
    ids = [q.id for q in gold]
    known = known_ref_ids if chosen == "wattbot2025" else None
    if chosen == "wattbot2025":
        base = score2025.score_predictions(gold, preds, known)
        scored: Sequence[QuestionScore] = base.rows
    else:
        scored = [wattbot2026.score_question(q, preds.get(q.id)) for q in gold]
    rows = tuple(_row(q, preds.get(q.id), s, known) for q, s in zip(gold, scored, strict=True))
    return summarise(
        chosen,
        rows,
        flagged=any(q.flagged for q in gold),
        missing=tuple(i for i in ids if i not in preds),
        extra=tuple(sorted(set(preds) - set(ids))),
    )


def summarise(
    metric: str,
    rows: Sequence[ScoredRow],
    *,
    flagged: bool = False,
    missing: tuple[str, ...] = (),
    extra: tuple[str, ...] = (),
) -> MetricReport:
    """A report from scored rows (fresh, or read back from a score table)."""
    chosen = check_metric(metric)
    if not rows:
        raise ValueError("no scored rows to summarise")
    n = len(rows)
    value = sum(r.value for r in rows) / n
    ref = sum(r.ref for r in rows) / n
    unanswerable = [r for r in rows if r.unanswerable]
    # Both leaderboards average the abstention check over every question (a row's `na` is 1
    # on an answerable question), so the final is the mean of the rows' totals.
    na = sum(r.na for r in rows) / n
    final = sum(r.total for r in rows) / n
    cited = sum(r.cited for r in rows)
    hits = sum(r.cited_gold for r in rows)
    gold_refs = sum(r.gold_refs for r in rows)
    precision = hits / cited if cited else 0.0
    recall = hits / gold_refs if gold_refs else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return MetricReport(
        metric=chosen,
        rows=tuple(rows),
        final=final,
        value=value,
        ref=ref,
        na=na,
        unit=sum(r.unit for r in rows) / n,
        ref_precision=precision,
        ref_recall=recall,
        ref_f1=f1,
        unanswerable=len(unanswerable),
        false_answer_rate=(sum(r.false_answer for r in unanswerable) / len(unanswerable)) if unanswerable else None,
        blank_rate=sum(r.blank for r in rows) / n,
        false_answers=sum(r.false_answer for r in unanswerable),
        false_refusals=sum(r.blank for r in rows if not r.unanswerable),
        per_flag=per_flag(rows) if flagged or any(r.flags for r in rows) else {},
        missing=missing,
        extra=extra,
    )


def per_flag(rows: Sequence[ScoredRow]) -> dict[str, FlagRate]:
    """Per flag (in FLAG_COLUMNS order) the flagged rows and how many got the value wrong."""
    out: dict[str, FlagRate] = {}
    for flag in FLAG_COLUMNS:
        flagged = [r for r in rows if flag in r.flags]
        if flagged:
            out[flag] = FlagRate(len(flagged), sum(1 for r in flagged if r.value < 1.0))
    return out


# ── internals ──────────────────────────────────────────────────────────────


def _row(question: Question, pred: Answer | None, scored: QuestionScore, known: Collection[str] | None) -> ScoredRow:
    gold = question.gold
    assert gold is not None
    pred = pred if pred is not None else Answer.blank(question.answer_unit)
    gold_ids, pred_ids = parse_ref_ids(gold.ref_id), parse_ref_ids(pred.ref_id)
    if known is not None:
        gold_ids, pred_ids = resolve_ref_ids(gold_ids, known), resolve_ref_ids(pred_ids, known)
    unanswerable = is_blank_value(gold.answer_value)
    answered = not (pred.is_blank or is_blank_value(pred.answer_value))
    gold_unit = gold.answer_unit or question.answer_unit
    return ScoredRow(
        id=question.id,
        value=scored.value,
        ref=scored.ref,
        na=scored.na,
        total=scored.total,
        error_type=scored.error_type,
        unanswerable=unanswerable,
        false_answer=unanswerable and answered,
        unit=1.0 if wattbot2026.unit_key(gold_unit) == wattbot2026.unit_key(pred.answer_unit or gold_unit) else 0.0,
        cited=len(set(pred_ids)),
        cited_gold=len(set(pred_ids) & set(gold_ids)),
        gold_refs=len(set(gold_ids)),
        flags=question.flags,
        blank=not answered,
    )
