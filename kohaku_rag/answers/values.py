"""An answer_value read as blank, a number, a range, a list or text, and when two match:
the WattBot 2026 rules of reading and comparing values (the 2026 metric, evaluation/
wattbot2026.py, scores with them; voting groups list answers with `same_list`).

* numbers match within a relative tolerance of 1e-3 with an absolute fallback of 1e-3
  (`math.isclose(p, g, rel_tol=1e-3, abs_tol=1e-3)`, computed in Decimal); True/False
  are the numbers 1/0 ("TRUE", "yes" read as 1);
* a gold `[lo,hi]` is a range: a single number inside it (either end within the
  tolerance) is right, and so is the same range (endpoints sorted, each within the
  tolerance; a two-number list in any brackets counts as that range);
* a gold `(a,b)` is a list: the prediction must give every member, in any order, and
  nothing else (`(a,b)`, `[a,b]` or `{a,b}`; members matched one to one, numbers within
  the tolerance, text after normalisation); `{a,b}` is a set of terms (order and repeats
  ignored), compared like a list;
* text matches after normalisation (`normalise.canon_text`), a trailing unit that echoes
  the question's expected unit dropped ("5 GPUs" == "5" for unit GPUs).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from kohaku_rag.answers.normalise import canon_text, is_blank_value, parse_value, split_collection

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
