"""Which answer form a question asks for: several values (a WattBot 2026 list) or one, and
whether its one value is computed from stated ones or read off the context.

WattBot 2026 golds write the values a question asks from several sources as a list `(a,b)`
(every member required); its question files flag those questions `Reconcile`. Without the
flag (the 2025 files, a user's own question) the wording decides: "respectively", "which
two ...", "list all/the/both/each ...", "name all/both/the three ...", "each paper/study/
source/report", "... of each of ...". Plain "both" is not enough: in "True or False: ...
reduces both X and Y" and "... which includes both A and B" one value is still asked for.

A question computes when its wording asks for a relation between stated values or a
combination of them: "how many times", "by what factor", "-fold", a ratio, a difference,
"how much more/less/higher/lower", a percentage change, a total or combined amount, an
average over values, or a what-if ("if ... how much", "would ... consume"). The wording
decides, never a file's Math flag, so the rule is the same for any question file.

A question asking for a range ("what is the range of ...") is answered `[lo,hi]`; a reply
that writes the two numbers bare ("0.8,3500") is read as that range, since no scorer reads
a bare pair as one. A comma that groups thousands ("3,426") is left alone.
"""

from __future__ import annotations

import re

from kohaku_rag.answers.records import Question

_SEVERAL = re.compile(
    r"\brespectively\b"
    r"|\b(?:which|what) (?:two|three|four|five|2|3|4|5)\b"
    r"|\blist (?:all|the|both|each)\b"
    r"|\bname (?:all|both|the (?:two|three|four|five))\b"
    r"|\beach (?:paper|study|source|report|of the)\b",
    re.IGNORECASE,
)
_COMPUTES = re.compile(
    r"\bhow many times\b|\b(?:by )?what factor\b|\bfold\b|-fold\b|\bratio\b"
    r"|\bdifference\b|\bhow much (?:more|less|higher|lower|greater|larger|smaller|bigger|faster|slower)\b"
    r"|\b(?:more|less|fewer|higher|lower|greater|larger|smaller) than\b"
    r"|\b(?:by )?what (?:percent|percentage)\b|\bpercent(?:age)? (?:increase|decrease|reduction|change|drop|gain)\b"
    r"|\b(?:increase|decrease|reduction|change|drop|gain) in percent"
    r"|\b(?:total|combined|in all|altogether|sum of|average of)\b"
    r"|\bif\b.*\bhow (?:much|many|long)\b|\bwould\b.*\b(?:consume|emit|cost|require|use|take|save|produce)\b"
    r"|\b(?:calculate|compute|estimate)\b",
    re.IGNORECASE,
)
_RANGE = re.compile(r"\brange\b", re.IGNORECASE)
_NUM = r"-?\d+(?:\.\d+)?"
_BARE_PAIR = re.compile(rf"^\s*({_NUM})\s*[,;]\s*({_NUM})\s*$")
_THOUSANDS = re.compile(r"^\s*-?\d{1,3},\d{3}\s*$")
# "True or False: ...", "True/False - ...": a statement whose answer is 1 or 0.
TRUE_FALSE_PREFIX = re.compile(r"^\s*true\s*(?:\bor\b|/)\s*false\b[\s:?.\-]*", re.IGNORECASE)


def asks_true_false(question: Question) -> bool:
    """The question is a true/false statement (answered 1 or 0)."""
    return TRUE_FALSE_PREFIX.match(question.question) is not None


def asks_for_several(question: Question) -> bool:
    """The question asks for several values: its Reconcile flag, or its wording (see the
    module docstring); never a true/false statement."""
    if "Reconcile" in question.flags:
        return True
    return not asks_true_false(question) and _SEVERAL.search(question.question) is not None


def several_values_rule(unit: str | None) -> str:
    """The prompt's answer_value line for a question that asks for several values."""
    what = f"each a number in {unit} (no unit, no commas)" if unit else "each the exact name or term"
    return f"answer_value: the question asks for several values: give every one, {what}, as a list (a,b)."


def asks_to_compute(question: Question) -> bool:
    """The question's one value is computed from values the context states (see the module
    docstring); never a true/false statement nor a question asking for several values."""
    text = question.question
    return not asks_true_false(question) and not asks_for_several(question) and _COMPUTES.search(text) is not None


def asks_for_range(question: Question) -> bool:
    """The question asks for a range of values (never a true/false statement)."""
    return not asks_true_false(question) and _RANGE.search(question.question) is not None


def range_from_pair(question: Question, value: str) -> str:
    """A bare two-number reply to a range question as `[lo,hi]`; any other value unchanged."""
    match = _BARE_PAIR.match(value)
    if match is None or _THOUSANDS.match(value) or not asks_for_range(question):
        return value
    return f"[{match.group(1)},{match.group(2)}]"
