"""The WattBot 2026 metric, row by row.

Final = 0.75 × value + 0.20 × ref + 0.05 × abstention; the unit is reported, weight 0.

* value (1 or 0):
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
  question, as the official 2026 scorer does (issue 34: averaging over the unanswerable
  questions only gave 0.808 where the leaderboard gave 0.857), so `final` is the mean of
  the rows' totals.
* Reference typos are not resolved (the official scorer compares ids as written).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from kohaku_rag.evaluation.normalise import canon_text, is_blank_value, parse_ref_ids, parse_value, split_collection
from kohaku_rag.evaluation.records import Answer, Question
from kohaku_rag.evaluation.score import QuestionScore, error_type

VALUE_WEIGHT = 0.75
REF_WEIGHT = 0.20
NA_WEIGHT = 0.05
REL_TOL = Decimal("0.001")
ABS_TOL = Decimal("0.001")

Kind = Literal["blank", "number", "range", "list", "text"]


@dataclass(frozen=True)
class Value:
    """An answer_value read under the 2026 rules.

    number: `numbers` = (x,); range: (lo, hi) sorted; list: `items`, each a number or text
    Value; text: only `key`. `key` is the normalised text of the whole value (what a text
    gold is compared with)."""

    kind: Kind
    key: str
    numbers: tuple[Decimal, ...] = ()
    items: tuple[Value, ...] = ()


@dataclass(frozen=True)
class Components:
    """One question's 2026 parts: value and abstention in {0, 1} (abstention None on an
    answerable question), ref the F1, unit whether the unit matched (weight 0)."""

    value: float
    ref: float
    abstention: float | None
    unit: float


def read_value(text: object, unit: str | None = None) -> Value:
    """An answer_value (gold or predicted) under the 2026 rules; `unit` is the question's
    answer_unit, whose echo at the end of a value is ignored."""
    raw = unicodedata.normalize("NFKC", "" if text is None else str(text)).strip()
    if is_blank_value(raw):
        return Value("blank", "")
    split = split_collection(raw)
    if split is not None:
        if raw[0] == "[":  # "[10,20]", "[1,000,2,000]": the 2025 range reading first
            parsed = parse_value(raw)
            if parsed.kind == "range":
                return Value("range", canon_text(raw), parsed.numbers)
        items = tuple(_scalar(p, unit) for p in split[1])
        items = tuple(i for i in items if i.kind != "blank")
        key = " ".join(i.key for i in items)
        if raw[0] == "{":  # a set of terms: repeats collapse
            items = tuple({i.key if i.kind == "text" else str(i.numbers): i for i in items}.values())
        if len(items) == 1:
            return items[0]
        if raw[0] == "[" and len(items) == 2 and all(i.kind == "number" for i in items):
            return Value("range", key, tuple(sorted(i.numbers[0] for i in items)))
        if items:
            return Value("list", key, items=items)
        return Value("blank", "")
    return _scalar(raw, unit)


def values_match(gold: Value, pred: Value) -> bool:
    """The 2026 value rule (module docstring)."""
    if gold.kind == "blank" or pred.kind == "blank":
        return gold.kind == pred.kind
    if gold.kind == "text":
        return gold.key == pred.key
    if gold.kind == "number":
        return pred.kind == "number" and _close(pred.numbers[0], gold.numbers[0])
    if gold.kind == "range":
        lo, hi = gold.numbers
        if pred.kind == "number":
            x = pred.numbers[0]
            return lo <= x <= hi or _close(x, lo) or _close(x, hi)
        ends = _two_numbers(pred)
        return ends is not None and _close(ends[0], lo) and _close(ends[1], hi)
    # gold list
    members = _members(pred)
    return members is not None and _same_members(gold.items, members)


def same_list(a: object, b: object, unit: str | None = None) -> bool | None:
    """Whether two answer_values are the same list (members in any order, numbers within the
    tolerance); None unless both are lists (what voting groups by)."""
    first, second = read_value(a, unit), read_value(b, unit)
    if first.kind != "list" or second.kind != "list":
        return None
    return _same_members(first.items, second.items)


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


# ── internals ──────────────────────────────────────────────────────────────


def _close(pred: Decimal, gold: Decimal) -> bool:
    return abs(pred - gold) <= max(REL_TOL * max(abs(pred), abs(gold)), ABS_TOL)


def _scalar(text: str, unit: str | None) -> Value:
    parsed = parse_value(text, unit)
    if parsed.kind == "blank":
        return Value("blank", "")
    key = _text_key(text, unit)
    if parsed.kind in ("number", "boolean"):
        return Value("number", key, parsed.numbers)
    if parsed.kind == "range":
        return Value("range", key, parsed.numbers)
    return Value("text", key)


def _text_key(text: str, unit: str | None) -> str:
    key = canon_text(text)
    echo = canon_text(unit) if unit is not None and not is_blank_value(unit) else ""
    if echo and key.endswith(" " + echo):
        key = key[: -len(echo) - 1].strip()
    return key


def _two_numbers(value: Value) -> tuple[Decimal, Decimal] | None:
    if value.kind == "range":
        return value.numbers[0], value.numbers[1]
    if value.kind == "list" and len(value.items) == 2 and all(i.kind == "number" for i in value.items):
        low, high = sorted(i.numbers[0] for i in value.items)
        return low, high
    return None


def _members(value: Value) -> tuple[Value, ...] | None:
    if value.kind == "list":
        return value.items
    if value.kind == "range":  # "[a,b]" written for a two-number list
        return tuple(Value("number", "", (n,)) for n in value.numbers)
    return None


def _item_match(gold: Value, pred: Value) -> bool:
    if gold.kind == "number" and pred.kind == "number":
        return _close(pred.numbers[0], gold.numbers[0])
    return gold.key == pred.key


def _same_members(gold: Sequence[Value], pred: Sequence[Value]) -> bool:
    """A one-to-one matching of every gold member to a predicted one (no extra members)."""
    if len(gold) != len(pred):
        return False

    def assign(i: int, used: frozenset[int]) -> bool:
        if i == len(gold):
            return True
        return any(
            j not in used and _item_match(gold[i], pred[j]) and assign(i + 1, used | {j}) for j in range(len(pred))
        )

    return assign(0, frozenset())
