"""Whether an answer's value is of the form its question asks for.

Why: a small model sometimes fills a field with something that is not an answer: the
rule it was given ("the answer in kWh"), a phrase, a pair standing for a power of ten. Shown
under a confident citation, one such value costs the tool its user's trust. A phrase list
catches only the spellings someone thought of; the question itself says what a value must
look like, so the check is against that:

* a question with a unit asks for a number in it: a number, a `[low,high]` range, or for
  several values a list `(a,b)` of numbers (scientific notation is read: normalise.py);
* a true/false statement asks for 1 or 0;
* a question without a unit asks for a name or term: one the passages use (its words are in
  the context), or a number (a year, a count).

A value of another form is not an answer: `form_problem` says why in words a person reads,
and the answerer abstains with that reason (answer.py), which the card shows.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kohaku_rag.answers.answer_forms import asks_for_several, asks_true_false
from kohaku_rag.answers.normalise import is_blank_value, parse_value, split_collection
from kohaku_rag.answers.records import Answer, Question

__all__ = ["FORM_CHECK", "form_problem"]

# The kind of the run-log entry that records why a value was not taken as an answer.
FORM_CHECK = "form check"

_WORD = re.compile(r"[a-z0-9]+")
# A name's words the passages must use, at least this share of them (a name may be
# paraphrased a little: "Jevons paradox" for "Jevons' Paradox").
_NAME_WORDS_FOUND = 0.6


def form_problem(question: Question, answer: Answer, context: Sequence[str]) -> str | None:
    """Why `answer`'s value is not of the form `question` asks for; None when it is (and for
    an abstention). `context` is the text of the passages the model was given."""
    if answer.is_blank or is_blank_value(answer.answer_value):
        return None
    value = answer.answer_value
    unit = question.answer_unit.strip()
    if asks_true_false(question):
        return None if value in ("1", "0") else f"the reply's value {_shown(value)} is not true or false"
    if unit and not is_blank_value(unit):
        if asks_for_several(question) and _all_numbers(value, unit):
            return None
        if parse_value(value, unit).kind in ("number", "range"):
            return None
        return f"the reply's value {_shown(value)} is not a number in {unit}"
    if parse_value(value, unit or None).kind in ("number", "range", "boolean"):
        return None
    if _used_by(value, context):
        return None
    return f"the reply's value {_shown(value)} is not a name or term the cited passages use"


def _all_numbers(value: str, unit: str) -> bool:
    split = split_collection(value)
    if split is None:
        return False
    return all(parse_value(member, unit).kind in ("number", "range") for member in split[1])


def _used_by(value: str, context: Sequence[str]) -> bool:
    """The name's words are (mostly) words of the passages."""
    words = _WORD.findall(value.lower())
    if not words:
        return False
    found = set(_WORD.findall(" ".join(context).lower()))
    return sum(w in found for w in words) >= _NAME_WORDS_FOUND * len(words)


def _shown(value: str, limit: int = 60) -> str:
    flat = " ".join(value.split())
    return repr(flat if len(flat) <= limit else flat[: limit - 1] + "…")
