"""The WattBot score and the paper's error taxonomy.

Score per question = 0.75 × value + 0.15 × ref + 0.10 × NA (the official recipe quoted
in KohakuRAG docs/wattbot.md). The component rules follow KohakuRAG's own validator,
`scripts/wattbot_validate.py` (KohakuBlueleaf/KohakuRAG @ 0d5ac258), checked against the
WattBot 2025 Kaggle metric (copy in qualiaMachine/KohakuRAG_UI @ 1569223 :
scripts/score.py) and the 2026 metric's text normalisation:

* value: 1 when the prediction matches gold. Numbers match within ±0.1% of the gold
  value (Kaggle: "within ±0.1% relative tolerance"; KohakuRAG: |p-g| <= 0.001·|g|),
  computed exactly in Decimal; a gold 0 therefore needs an exact 0 (the validator's
  1e-9 floor, in effect; Kaggle's extra abs_tol=1e-3 is not used, it would accept 5 %
  around gold 0.02). Ranges match endpoint by endpoint with the same tolerance
  (KohakuRAG; the Kaggle metric also sorts the endpoints, as we do; unlike Kaggle, a
  single number inside a gold range does not match, as in KohakuRAG). True/False are 1/0
  numbers. Categories match after `canon_text` (case, punctuation, leading article,
  whitespace; from the 2026 metric). Predictions are read leniently with
  `normalise.parse_value` ("1,438 lbs" == 1438), as the Kaggle metric normalises
  submissions. An unanswerable gold (answer_value is_blank) scores value 1 only for a
  blank prediction (KohakuRAG and the 2026 metric; the 2025 Kaggle code gave it
  unconditionally, a bug the 2026 metric documents and fixes).
* ref: Jaccard overlap of the lower-cased id sets; both empty -> 1, one empty -> 0
  (identical in KohakuRAG and Kaggle). Blank gold with a blank, uncited prediction -> 1.
* NA: for an answerable gold the NA component is always earned ("Not an NA question",
  KohakuRAG `_score_na_row`; Kaggle: "not a 'NA' case, don't penalize") — a needless
  abstention already loses the value and ref parts. For an unanswerable gold it is
  earned only when the prediction is blank AND cites nothing (KohakuRAG requires both
  answer_value and ref_id blank).
* A missing prediction counts as `Answer.blank(unit)` (KohakuRAG gives it NA 0 instead;
  we follow the project brief so a dropped row scores like an abstention).

`ScoreReport.final` is the mean per-question score (KohakuRAG's FINAL WATTBOT SCORE).
`final_kaggle` swaps the NA mean for the 2025 Kaggle leaderboard's NA *recall* over the
truly unanswerable questions (1.0 when there are none).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal, get_args

from kohaku_rag.answers.normalise import (
    ParsedValue,
    canon_text,
    is_blank_value,
    parse_ref_ids,
    parse_value,
    resolve_ref_ids,
)
from kohaku_rag.answers.records import BLANK, Answer, Question

VALUE_WEIGHT = 0.75
REF_WEIGHT = 0.15
NA_WEIGHT = 0.10
REL_TOL = Decimal("0.001")  # ±0.1 %
ROUNDING_TOL = Decimal("0.05")  # error taxonomy: "within 5 %"
UNIT_FACTOR_TOL = Decimal("0.01")

ErrorType = Literal[
    "correct",
    "unnecessary_abstention",
    "false_answer",
    "reference_mismatch",
    "value_selection",
    "rounding",
    "unit_conversion",
    "type_mismatch",
]
ERROR_TYPES: tuple[str, ...] = get_args(ErrorType)

# Ratios that a unit slip produces: powers of ten (k/M/G prefixes, percent vs fraction),
# binary prefixes, time (min, h, day, year), kWh<->MJ, kg<->lb, gallon<->litre, mile<->km.
_UNIT_FACTORS: tuple[Decimal, ...] = tuple(
    sorted(
        {Decimal(10) ** k for k in range(1, 13)}
        | {Decimal(1024) ** k for k in range(1, 4)}
        | {Decimal(f) for f in ("3.6", "60", "3600", "24", "365", "8760", "2.20462", "3.78541", "1.60934")}
    )
)


@dataclass(frozen=True)
class QuestionScore:
    """One question's components (each in [0, 1]), weighted total, and error type.

    error_type, decided in this order:
      correct                 value, ref and NA all full (total == 1).
      false_answer            gold is unanswerable and the prediction gave a value.
      unnecessary_abstention  gold is answerable and the prediction is blank.
      reference_mismatch      the value is right (or a blank gold was met with a blank
                              value) but the cited ids differ from gold (ref < 1); or
                              the value is wrong, no other class fits, and no cited id
                              is a gold id (ref == 0: the answer came from the wrong
                              document).
      type_mismatch           the value is wrong and its type differs from gold's:
                              number (True/False count as 1/0) vs range vs text.
      rounding                number or range, every gold endpoint matched within 5 %
                              but not within 0.1 %.
      unit_conversion         number or range, every endpoint off by the same factor
                              f (or 1/f), within 1 %, for f a power of ten (10..1e12),
                              1024^k, 3.6, 24, 60, 365, 3600, 8760, 2.20462 (kg/lb),
                              3.78541 (gal/L) or 1.60934 (mi/km).
      value_selection         the value is wrong (no class above fits) while at least
                              one cited id is a gold id (ref > 0): wrong number or
                              entity taken from the right document.
    """

    id: str
    value: float
    ref: float
    na: float
    total: float
    error_type: ErrorType


@dataclass(frozen=True)
class ScoreReport:
    rows: tuple[QuestionScore, ...]
    final: float
    value: float
    ref: float
    na: float
    na_recall: float
    final_kaggle: float
    missing: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()

    def error_counts(self) -> dict[str, int]:
        counts: Counter[str] = Counter(row.error_type for row in self.rows)
        return {kind: counts.get(kind, 0) for kind in ERROR_TYPES}


def values_match(gold: ParsedValue, pred: ParsedValue, pred_text: str = "") -> bool:
    """The answer_value rule (see module docstring). `pred_text` is the raw predicted
    string, compared as text when gold is categorical."""
    if gold.kind == "blank" or pred.kind == "blank":
        return gold.kind == pred.kind
    if gold.kind == "text":
        return canon_text(gold.value) == canon_text(pred_text or pred.value)
    if _shape(gold) != _shape(pred):
        return False
    return all(_within(p, g, REL_TOL) for g, p in zip(gold.numbers, pred.numbers, strict=True))


def ref_jaccard(gold: Collection[str], pred: Collection[str]) -> float:
    gold_set, pred_set = set(gold), set(pred)
    if not gold_set and not pred_set:
        return 1.0
    if not gold_set or not pred_set:
        return 0.0
    return len(gold_set & pred_set) / len(gold_set | pred_set)


def score_question(
    question: Question, pred: Answer | None, known_ref_ids: Collection[str] | None = None
) -> QuestionScore:
    """Score one prediction (None = missing = blank) against `question.gold`.

    With `known_ref_ids` (the corpus ids), typo'd ids on either side are resolved first
    (`normalise.resolve_ref_ids`), so gold `cottier2025` matches a cited `cottier2024`.
    """
    gold = question.gold
    if gold is None:
        raise ValueError(f"question {question.id}: has no gold answer to score against")
    pred = pred if pred is not None else Answer.blank(question.answer_unit)

    # Gold and prediction are read the same way (with the question's unit), so an identical
    # "8 GPUs" on an is_blank-unit question matches itself.
    gold_value = parse_value(gold.answer_value, question.answer_unit)
    pred_blank = pred.is_blank or is_blank_value(pred.answer_value)
    pred_value = ParsedValue("blank", BLANK) if pred_blank else parse_value(pred.answer_value, question.answer_unit)
    pred_blank = pred_value.kind == "blank"
    gold_refs, pred_refs = parse_ref_ids(gold.ref_id), parse_ref_ids(pred.ref_id)
    if known_ref_ids is not None:
        gold_refs, pred_refs = resolve_ref_ids(gold_refs, known_ref_ids), resolve_ref_ids(pred_refs, known_ref_ids)

    value = 1.0 if values_match(gold_value, pred_value, pred.answer_value.strip()) else 0.0
    ref = ref_jaccard(gold_refs, pred_refs)
    na = 1.0 if gold_value.kind != "blank" or (pred_blank and not pred_refs) else 0.0
    total = VALUE_WEIGHT * value + REF_WEIGHT * ref + NA_WEIGHT * na
    error = _error_type(gold_value, pred_value, value, ref, na)
    return QuestionScore(question.id, value, ref, na, total, error)


def check_gold(gold: Sequence[Question]) -> None:
    """Gold questions to score: at least one, each id once."""
    if not gold:
        raise ValueError("no gold questions to score")
    duplicated = sorted(i for i, n in Counter(q.id for q in gold).items() if n > 1)
    if duplicated:
        raise ValueError(f"gold question id(s) repeated: {', '.join(duplicated)}")


def score_predictions(
    gold: Sequence[Question],
    preds: Mapping[str, Answer],
    known_ref_ids: Collection[str] | None = None,
) -> ScoreReport:
    """Score every gold question; a question without a prediction counts as blank."""
    check_gold(gold)
    ids = [q.id for q in gold]

    rows = tuple(score_question(q, preds.get(q.id), known_ref_ids) for q in gold)
    n = len(rows)
    value = sum(r.value for r in rows) / n
    ref = sum(r.ref for r in rows) / n
    na = sum(r.na for r in rows) / n
    blank_gold = _unanswerable_ids(gold)
    unanswerable = [r for r in rows if r.id in blank_gold]
    na_recall = sum(r.na for r in unanswerable) / len(unanswerable) if unanswerable else 1.0
    return ScoreReport(
        rows=rows,
        final=sum(r.total for r in rows) / n,
        value=value,
        ref=ref,
        na=na,
        na_recall=na_recall,
        final_kaggle=VALUE_WEIGHT * value + REF_WEIGHT * ref + NA_WEIGHT * na_recall,
        missing=tuple(i for i in ids if i not in preds),
        extra=tuple(sorted(set(preds) - set(ids))),
    )


def error_type(gold: ParsedValue, pred: ParsedValue, value: float, ref: float, na: float) -> ErrorType:
    """The taxonomy class of a scored row (see `QuestionScore`); the 2026 metric's rows use it too."""
    return _error_type(gold, pred, value, ref, na)


# ── internals ──────────────────────────────────────────────────────────────


def _unanswerable_ids(gold: Sequence[Question]) -> set[str]:
    return {q.id for q in gold if q.gold is not None and is_blank_value(q.gold.answer_value)}


def _shape(value: ParsedValue) -> str:
    """Type for comparison: True/False are the numbers 1/0."""
    return "number" if value.kind == "boolean" else value.kind


def _within(pred: Decimal, gold: Decimal, rel_tol: Decimal) -> bool:
    return abs(pred - gold) <= rel_tol * abs(gold)


def _unit_factor(gold: Sequence[Decimal], pred: Sequence[Decimal]) -> bool:
    if any(g == 0 or p == 0 for g, p in zip(gold, pred)):
        return False
    for factor in _UNIT_FACTORS:
        for f in (factor, 1 / factor):
            if all(_within(p, g * f, UNIT_FACTOR_TOL) for g, p in zip(gold, pred)):
                return True
    return False


def _error_type(gold: ParsedValue, pred: ParsedValue, value: float, ref: float, na: float) -> ErrorType:
    if value == 1.0 and ref == 1.0 and na == 1.0:
        return "correct"
    if gold.kind == "blank":
        return "false_answer" if pred.kind != "blank" else "reference_mismatch"
    if pred.kind == "blank":
        return "unnecessary_abstention"
    if value == 1.0:
        return "reference_mismatch"
    if gold.kind != "text" or pred.kind != "text":
        if _shape(gold) != _shape(pred):
            return "type_mismatch"
        if all(_within(p, g, ROUNDING_TOL) for g, p in zip(gold.numbers, pred.numbers)):
            return "rounding"
        if _unit_factor(gold.numbers, pred.numbers):
            return "unit_conversion"
    return "value_selection" if ref > 0 else "reference_mismatch"
