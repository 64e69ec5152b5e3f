"""Computed answers (`compute = "expression"`): the model quotes its operands, we do the sums.

A 1.5B model copies a number well and does arithmetic badly. For a question with a unit,
the reply lists the numbers it uses as operands (a name, the value copied from the
context, its unit, the ref_id it came from) and writes the computation as an expression
over their names ("a / b", "(a - b) / b * 100", or just "a"). Then:

* every operand is checked against the context: its value must be stated by a snippet of
  the document it names (any snippet, if that one does not; the node that states it is
  kept); an operand stated nowhere makes the working unfounded;
* operands are put in the question's unit where the units differ by an SI prefix or a
  magnitude word ("5.4 million liters" for liters: 5400000), and operands in one base unit
  into the first one's (so "a / b" over kWh and MWh is a true ratio);
* the expression is evaluated by a whitelist over Python's AST (numbers, operand names,
  + - * / ** and a few functions; never `eval`), and the result, to 4 significant digits
  (within the ±0.1 % the WattBot score allows), replaces the reply's own answer_value.

The working (expression, operands with their node ids, result or what went wrong) is kept
with the prediction, and `kohaku explain` shows it.
"""

from __future__ import annotations

import ast
import json
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from decimal import Decimal
from typing import Any

from kohaku_rag.answering.citing import states
from kohaku_rag.answers.normalise import format_number, is_blank_value, normalise_answer, unit_factor
from kohaku_rag.answers.records import Answer
from kohaku_rag.errors import KohakuError
from kohaku_rag.retrieval.context import ContextItem

MAX_EXPRESSION = 80
_BINARY: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[float], float]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_FUNCTIONS: dict[str, Callable[..., float]] = {
    "abs": abs,
    "min": min,
    "max": max,
    "round": round,
    "sqrt": math.sqrt,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
}
_MAGNITUDES = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
_NUMBER = re.compile(r"^[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")


class ComputeError(KohakuError, ValueError):
    """An expression outside the whitelist, or one that cannot be evaluated."""


def safe_eval(expression: str, names: Mapping[str, float]) -> float:
    """The value of an arithmetic expression over `names`, by walking its AST: only numbers,
    the given names, + - * / ** (exponents up to 100), unary signs and the functions in
    _FUNCTIONS are allowed. Anything else (attributes, subscripts, other names, calls,
    strings) is a ComputeError, never executed."""
    if len(expression) > MAX_EXPRESSION:
        raise ComputeError(f"expression longer than {MAX_EXPRESSION} characters")
    try:
        tree = ast.parse(expression.replace("×", "*").replace("÷", "/").replace("^", "**"), mode="eval")
    except SyntaxError as exc:
        raise ComputeError(f"not an expression: {expression!r}") from exc

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
            return float(node.value)
        if isinstance(node, ast.Name) and node.id in names:
            return float(names[node.id])
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 100:
                raise ComputeError("exponent above 100")
            try:
                return _BINARY[type(node.op)](left, right)
            except (ZeroDivisionError, OverflowError) as exc:
                raise ComputeError(f"{expression!r}: {exc}") from exc
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](value(node.operand))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _FUNCTIONS
            and not node.keywords
            and 1 <= len(node.args) <= 4
        ):
            try:
                return float(_FUNCTIONS[node.func.id](*(value(a) for a in node.args)))
            except (ValueError, OverflowError) as exc:
                raise ComputeError(f"{expression!r}: {exc}") from exc
        what = node.id if isinstance(node, ast.Name) else type(node).__name__
        raise ComputeError(f"{expression!r}: {what} is not allowed")

    result = value(tree.body)
    if not math.isfinite(result):
        raise ComputeError(f"{expression!r} is not a finite number")
    return result


@dataclass(frozen=True)
class Operand:
    name: str
    value: str  # as the reply quoted it
    unit: str
    ref: str  # the document the reply says it came from
    node: str = ""  # the context snippet that states it ("" when none does)
    used: float | None = None  # the number after unit conversion
    cell: str = ""  # a table cell the reply named: "Table 2 · text generation · mean = 0.047"
    table_row: str = ""  # that cell's row label and column name in its table's record
    table_column: str = ""


@dataclass(frozen=True)
class Working:
    """How a computed answer was reached, stored with the prediction."""

    expression: str
    operands: tuple[Operand, ...] = ()
    result: str = ""  # the answer_value the computation gave ("" when it failed)
    error: str = ""  # why the computation was not used

    @property
    def founded(self) -> bool:
        """Every operand is stated in the context."""
        return bool(self.operands) and all(o.node for o in self.operands)

    def docs(self) -> tuple[str, ...]:
        """The documents the operands came from, in operand order."""
        return tuple(dict.fromkeys(o.node.split(":", 1)[0] for o in self.operands if o.node))

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Working | None:
        if not text:
            return None
        data = json.loads(text)
        return cls(data["expression"], tuple(Operand(**o) for o in data["operands"]), data["result"], data["error"])

    def describe(self) -> str:
        """One line for `kohaku explain`."""
        ops = "; ".join(
            f"{o.name} = {o.cell or f'{o.value} {o.unit}'} ({o.node or 'not in the context'}"
            f"{f', used as {o.used:g}' if o.used is not None else ''})"
            for o in self.operands
        )
        outcome = f"= {self.result}" if self.result else f"not used: {self.error}"
        return f"computed {self.expression} {outcome}; {ops}"


def read_operands(data: Mapping[str, Any]) -> tuple[list[Operand], str]:
    """The reply's operands and expression (malformed entries left out)."""
    raw = data.get("operands")
    operands = []
    for entry in raw if isinstance(raw, list) else []:
        if not isinstance(entry, dict):
            continue
        name, value = str(entry.get("name") or "").strip(), str(entry.get("value") or "").strip()
        if name and value:
            operands.append(
                Operand(name, value, str(entry.get("unit") or "").strip(), str(entry.get("ref_id") or "").strip())
            )
    return operands, str(data.get("expression") or "").strip()


def locate(operand: Operand, items: Sequence[ContextItem]) -> Operand:
    """The operand with the node stating its value: one of its document's snippets first,
    then any snippet; no node when none states it."""
    number = operand.value.replace(",", "")
    ordered = sorted(items, key=lambda i: i.doc_id != operand.ref)
    node = next((i.node_id for i in ordered if states(i.text, number) or states(i.text, operand.value)), "")
    return Operand(operand.name, operand.value, operand.unit, operand.ref, node)


def magnitude_of(unit: str) -> tuple[float, str]:
    """ "million liters" -> (1e6, "liters"); a unit without a magnitude word -> (1, unit)."""
    words = unit.split()
    if words and words[0].lower() in _MAGNITUDES:
        return _MAGNITUDES[words[0].lower()], " ".join(words[1:])
    return 1.0, unit


def in_units(operands: Sequence[Operand], question_unit: str) -> list[Operand]:
    """Each operand's number in the question's unit where it converts to it, else in the
    unit of the first operand it converts to (so ratios compare like with like)."""
    out: list[Operand] = []
    anchors: list[str] = []  # units operands were put into, first seen first
    for o in operands:
        scale, unit = magnitude_of(o.unit)
        number = float(o.value.replace(",", "")) * scale
        if not is_blank_value(question_unit) and unit_factor(unit, question_unit) is not None:
            number *= float(unit_factor(unit, question_unit) or 1)
        else:
            anchor = next((a for a in anchors if unit_factor(unit, a) is not None), None)
            if anchor is not None:
                number *= float(unit_factor(unit, anchor) or 1)
            elif unit:
                anchors.append(unit)
        out.append(replace(o, used=number))
    return out


def compute(data: Mapping[str, Any], items: Sequence[ContextItem], question_unit: str) -> Working | None:
    """The reply's working, checked and evaluated (None when the reply wrote none)."""
    operands, expression = read_operands(data)
    if not operands:
        return None
    expression = expression or (operands[0].name if len(operands) == 1 else "")
    located = [locate(o, items) for o in operands]
    bad = [o.value for o in located if not _NUMBER.match(o.value.replace(",", ""))]
    if bad:
        return Working(expression, tuple(located), error=f"operand value(s) {bad} are not numbers")
    if len({o.name for o in located}) != len(located):
        return Working(expression, tuple(located), error="operand names repeat")
    converted = in_units(located, question_unit)
    missing = [o.name for o in converted if not o.node]
    if missing:
        return Working(expression, tuple(converted), error=f"operand(s) {missing} are not stated in the context")
    try:
        result = safe_eval(expression, {o.name: o.used for o in converted if o.used is not None})
    except ComputeError as exc:
        return Working(expression, tuple(converted), error=str(exc))
    return Working(expression, tuple(converted), result=significant(result))


def named_operands(working: str) -> list[Operand]:
    """The operands of a used working that are table cells the reply named."""
    parsed = Working.from_json(working)
    if parsed is None or not parsed.result:
        return []
    return [o for o in parsed.operands if o.cell]


def named_cells(working: str) -> list[str]:
    """The table cells a used working read ("Table 2 · text generation · mean = 0.047")."""
    return [o.cell for o in named_operands(working)]


def significant(number: float, digits: int = 4) -> str:
    """`number` to `digits` significant digits, in plain notation ("8.72", "5439000")."""
    if number == 0:
        return "0"
    return format_number(Decimal(f"{number:.{digits}g}"))


def with_working(answer: Answer, working: Working, doc_ids: Sequence[str]) -> Answer:
    """The answer with the computation's result as its value and words, citing every
    document an operand came from."""
    if not working.result or answer.is_blank:
        return answer
    refs = working.docs() or answer.ref_id
    # The answer's words state the computed value too: the reply's own words hold its guess.
    unit = "" if is_blank_value(answer.answer_unit) else answer.answer_unit
    words = f"{working.result} {unit}".strip()
    computed = replace(answer, answer_value=working.result, answer=words, ref_id=refs)
    return normalise_answer(computed, answer.answer_unit, known_ref_ids=doc_ids)
