"""The WattBot 2026 metric, row by row.

Final = 0.75 × value + 0.20 × ref + 0.05 × abstention; the unit is reported, weight 0.

* value (1 or 0), read and compared by `answers/values.py`:
  - an unanswerable gold (answer_value is_blank) is right only when the prediction is blank;
    a blank prediction on an answerable gold is wrong;
  - numbers match within a relative tolerance of 1e-3 with an absolute fallback of 1e-3
    (`math.isclose(p, g, rel_tol=1e-3, abs_tol=1e-3)`, computed in Decimal); True/False
    are the numbers 1/0 ("TRUE", "yes" read as 1);
  - a gold `[lo,hi]` is a range: a single number inside it (either end within the
    tolerance) is right, and so is the same range (endpoints sorted, each within the
    tolerance; a two-number list in any brackets counts as that range);
  - a gold `(a,b)` is a list: the prediction must give every member, in any order, and
    nothing else (`(a,b)`, `[a,b]` or `{a,b}`; members matched one to one, numbers within
    the tolerance, text after normalisation); one member alone is wrong;
  - `{a,b}` is a set of terms (order and repeats ignored), compared like a list;
  - text matches after normalisation: case, whitespace, punctuation and a leading article
    do not matter (`normalise.canon_text`), and a trailing unit that echoes the question's
    expected unit is dropped ("5 GPUs" == "5" for unit GPUs);
  - a prediction is read leniently like the 2025 scorer does ("1,438 lbs", "2.5 million",
    "about 40", "10-20" -> the range [10,20]).
* ref: F1 between the cited and the gold id sets (lower-cased); both empty -> 1, one
  empty -> 0. Citing one of four gold documents earns 2·1·0.25/1.25 = 0.4.
* abstention: on an unanswerable question, right only when answer_value, ref_id, ref_url
  and supporting_materials are all blank (a refusal that still cites is wrong); an
  answerable question counts 1 (nothing to abstain from). The final averages it over every
  question, as the official 2026 scorer does (averaging over the unanswerable
  questions only gave 0.808 where the leaderboard gave 0.857), so `final` is the mean of
  the rows' totals.
* Reference typos are not resolved (the official scorer compares ids as written).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kohaku_rag.answers.normalise import is_blank_value, parse_ref_ids, parse_value
from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.answers.values import Value, read_value, values_match
from kohaku_rag.evaluation.wattbot2025 import QuestionScore, error_type

VALUE_WEIGHT = 0.75
REF_WEIGHT = 0.20
NA_WEIGHT = 0.05


@dataclass(frozen=True)
class Components:
    """One question's 2026 parts: value and abstention in {0, 1} (abstention None on an
    answerable question), ref the F1, unit whether the unit matched (weight 0)."""

    value: float
    ref: float
    abstention: float | None
    unit: float


def ref_f1(gold: Sequence[str], pred: Sequence[str]) -> float:
    gold_set, pred_set = set(gold), set(pred)
    if not gold_set and not pred_set:
        return 1.0
    if not gold_set or not pred_set:
        return 0.0
    hits = len(gold_set & pred_set)
    return 2 * hits / (len(gold_set) + len(pred_set))


def abstained(answer: Answer) -> bool:
    """All four evidence fields blank: answer_value, ref_id, ref_url, supporting_materials."""
    return (
        is_blank_value(answer.answer_value)
        and not parse_ref_ids(answer.ref_id)
        and not parse_ref_ids(answer.ref_url)
        and is_blank_value(answer.supporting_materials)
    )


def components(question: Question, pred: Answer | None) -> Components:
    """The 2026 parts of one prediction (None = missing = a full abstention)."""
    gold = question.gold
    if gold is None:
        raise ValueError(f"question {question.id}: has no gold answer to score against")
    pred = pred if pred is not None else Answer.blank(question.answer_unit)
    unit = question.answer_unit
    gold_value = read_value(gold.answer_value, unit)
    # A blank flag from the pipeline is an abstention whatever the value field says.
    pred_value = Value("blank", "") if pred.is_blank else read_value(pred.answer_value, unit)
    value = 1.0 if values_match(gold_value, pred_value) else 0.0
    ref = ref_f1(parse_ref_ids(gold.ref_id), parse_ref_ids(pred.ref_id))
    abstention = (1.0 if abstained(pred) else 0.0) if gold_value.kind == "blank" else None
    unit_ok = 1.0 if unit_key(gold.answer_unit or unit) == unit_key(pred.answer_unit or unit) else 0.0
    return Components(value, ref, abstention, unit_ok)


def score_question(question: Question, pred: Answer | None) -> QuestionScore:
    """One row in the shared `QuestionScore` form (na = 1 on an answerable question)."""
    c = components(question, pred)
    na = 1.0 if c.abstention is None else c.abstention
    total = VALUE_WEIGHT * c.value + REF_WEIGHT * c.ref + NA_WEIGHT * na
    assert question.gold is not None
    pred = pred if pred is not None else Answer.blank(question.answer_unit)
    gold_parsed = parse_value(question.gold.answer_value, question.answer_unit)
    pred_parsed = parse_value("is_blank" if pred.is_blank else pred.answer_value, question.answer_unit)
    return QuestionScore(
        question.id, c.value, c.ref, na, total, error_type(gold_parsed, pred_parsed, c.value, c.ref, na)
    )


@dataclass(frozen=True)
class Totals:
    final: float
    value: float
    ref: float
    na: float  # the abstention check averaged over every question (an answerable one counts 1)
    unit: float


def totals(questions: Sequence[Question], preds: Mapping[str, Answer]) -> Totals:
    """The 2026 final and its components over `questions` (each must have gold)."""
    if not questions:
        raise ValueError("no gold questions to score")
    parts = [components(q, preds.get(q.id)) for q in questions]
    n = len(parts)
    value = sum(p.value for p in parts) / n
    ref = sum(p.ref for p in parts) / n
    na = sum(1.0 if p.abstention is None else p.abstention for p in parts) / n
    unit = sum(p.unit for p in parts) / n
    return Totals(VALUE_WEIGHT * value + REF_WEIGHT * ref + NA_WEIGHT * na, value, ref, na, unit)


def unit_key(unit: str) -> str:
    """The unit as compared (weight 0): case and spacing ignored, blank markers as empty."""
    return "" if is_blank_value(unit) else re.sub(r"\s+", " ", unit.strip().lower())
