"""Choose, don't generate (`choose = "candidates"`): for a question with a unit, the reply's
answer_value is picked from the values the context's marked evidence sentences state.

A 1.5B model copying a number from a long context slips a digit or takes the wrong one; a
list of the candidates (in the question's unit where they convert, from sentences the
retriever marked as sharing the most question terms) turns copying into choosing. The enum
also offers OTHER (the reply's own `answer` words are then read for the value) and, with
computed answers, COMPUTED (the expression's result stands).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

from kohaku_rag.answers.normalise import format_number, unit_factor
from kohaku_rag.retrieval.context import ContextItem

OTHER = "other"
COMPUTED = "computed"
MAX_CANDIDATES = 12
# A number (thousands separators, decimals, an optional magnitude word) and the unit after it.
_QUANTITY = re.compile(
    r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)\s*(thousand|million|billion|trillion)?\s*(%|[A-Za-z][\w/$.-]*)?",
    re.I,
)
_MAGNITUDE = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_PERCENT = ("percent", "%", "percentage")
_COUNTS = ("B", "M", "K", "T")


def _same_unit(found: str, wanted: str) -> Decimal | None:
    """The factor from `found` to `wanted` when they name one unit (an SI prefix apart, a
    plural, % for percent); None when they do not."""
    f, w = found.strip().lower().rstrip("."), wanted.strip().lower()
    if f in _PERCENT and w in _PERCENT:
        return Decimal(1)
    if f and (f == w or f.rstrip("s") == w.rstrip("s")):
        return Decimal(1)
    return unit_factor(found.strip(), wanted.strip())


def candidates(items: Sequence[ContextItem], unit: str) -> list[str]:
    """The values the context's marked sentences state in `unit` (converted to it), in the
    order they appear; when none is in that unit, every number those sentences state."""
    sentences = [s for item in items for s in item.marks]
    in_unit: list[str] = []
    bare: list[str] = []
    for sentence in sentences:
        for match in _QUANTITY.finditer(sentence):
            number, magnitude, found_unit = match.group(1), match.group(2), match.group(3) or ""
            if found_unit in _COUNTS and not match.group(0)[len(number) :].startswith(" "):
                found_unit = ""  # "7B", "175M": a parameter count, not bytes or metres
            try:
                value = Decimal(number.replace(",", ""))
            except InvalidOperation:
                continue
            if magnitude:
                value *= Decimal(10) ** _MAGNITUDE[magnitude.lower()]
            bare.append(format_number(value))
            factor = _same_unit(found_unit, unit)
            if factor is not None:
                in_unit.append(format_number(value * factor))
    chosen = in_unit or bare
    return list(dict.fromkeys(chosen))[:MAX_CANDIDATES]


def value_schema(options: Sequence[str], computed: bool) -> dict[str, object]:
    """answer_value as a choice among `options`, OTHER and (with computed answers) COMPUTED."""
    return {"type": "string", "enum": [*options, *([COMPUTED] if computed else []), OTHER]}


CHOOSE_RULE = 'answer_value: one of the listed values (in the answer unit); "other" if none is the answer{computed}.'


def choose_rule(computed: bool) -> str:
    return CHOOSE_RULE.format(computed='; "computed" when the expression gives it' if computed else "")
