"""Ensemble voting over m runs' answers to one question.

Follows KohakuRAG's `scripts/wattbot_aggregate.py` (the newer version of that script in
the code store, with ref modes independent / ref_priority / answer_priority / union /
intersection, `ignore_blank` and tiebreak first/blank):

* a vote picks the most common value; ties go to the value that appears first
  (KohakuRAG `majority_vote`: "first occurrence breaks ties");
* independent: answer_value and ref_id are voted separately over all runs;
* ref_priority: the ref set is voted first, then the answer among the runs citing it;
* answer_priority: the answer is voted first, then the ref set among runs that gave it;
* union / intersection: the answer is voted, then the ref ids of the runs that gave it
  are united / intersected;
* majority (the reference scripts' `majority`): the answer is voted, and the ref ids of
  every run (after ignore_blank) are united, whatever answer each gave;
* first_non_blank (the reference scripts' fallback): the first run that answered, as it
  answered (all blank: the abstention);
* ignore_blank: blank answers are dropped before voting unless every run is blank;
  in the ref-set votes, empty ref sets are dropped the same way (KohakuRAG filters
  "is_blank" out of every majority vote it makes, ref votes included).

Where this module goes beyond KohakuRAG, which compares answer strings exactly:

* a number written in another SI prefix of the question's unit ("1500 kW", "1500000 W"
  for unit MW) is converted to that unit first, so it groups with "1.5";
* numbers within ±0.1 % of a group's first member (the scoring tolerance), ranges whose
  endpoints are, equal categories under `canon_text`, lists with the same members in any
  order (WattBot 2026's `(a,b)`, `values.same_list`), and all blanks each form one group;
  ref sets are compared as sets of lower-cased ids (order and spelling of the list
  ignored);
* the group's representative value is its most frequent exact value; among equally
  frequent values, the median one (numbers sorted; the lower middle for an even count),
  then the earliest;
* tiebreaks between equally large groups:
    first               the group holding the earliest run (KohakuRAG's rule);
    shortest_ref        the group whose representative run cites the fewest ids (a
                        ref-set vote: the smallest set), then first;
    highest_confidence  the group holding the single most confident run
                        (`Answer.confidence`; None ranks lowest), then first; an error
                        if no tied run carries a confidence. The answering pipeline
                        sets it from the model's token probabilities (the mean token
                        probability of the reply) when [generation] reply_confidence is
                        on, which a config with this tiebreak must turn on;
    blank               a tied answer vote abstains (KohakuRAG's "blank" abstains only
                        when every run differs; this is the same rule applied to any
                        tie at the top); ref-set ties fall back to first.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal, get_args

from kohaku_rag.answers.normalise import ParsedValue, canon_text, in_unit, is_blank_value, parse_ref_ids, parse_value
from kohaku_rag.answers.records import Answer
from kohaku_rag.answers.values import same_list

VoteMode = Literal[
    "independent", "answer_priority", "ref_priority", "union", "intersection", "majority", "first_non_blank"
]
Tiebreak = Literal["first", "shortest_ref", "highest_confidence", "blank"]
VOTE_MODES: tuple[str, ...] = get_args(VoteMode)
TIEBREAKS: tuple[str, ...] = get_args(Tiebreak)
_GROUP_TOL = Decimal("0.001")


@dataclass(frozen=True)
class _Run:
    index: int
    answer: Answer
    value: ParsedValue
    refs: tuple[str, ...]

    @property
    def blank(self) -> bool:
        return self.value.kind == "blank"


def vote(answers: Sequence[Answer], mode: str, ignore_blank: bool = True, tiebreak: str = "first") -> Answer:
    """The ensemble answer of `answers` (one per run, in run order) for one question."""
    if not answers:
        raise ValueError("vote needs at least one answer")
    if mode not in VOTE_MODES:
        raise ValueError(f"unknown vote mode {mode!r}; use one of {', '.join(VOTE_MODES)}")
    if tiebreak not in TIEBREAKS:
        raise ValueError(f"unknown tiebreak {tiebreak!r}; use one of {', '.join(TIEBREAKS)}")

    runs = [_read(i, a) for i, a in enumerate(answers)]
    if ignore_blank and any(not r.blank for r in runs):
        runs = [r for r in runs if not r.blank]

    if mode == "first_non_blank":
        first = next((r for r in runs if not r.blank), None)
        return _abstain(runs) if first is None else _result([first], first.refs)

    if mode == "ref_priority":
        ref_group = _vote_refs(runs, ignore_blank, tiebreak)
        value_group = _vote_values(ref_group, tiebreak)
        if value_group is None:
            return _abstain(runs)
        return _result(value_group, ref_group[0].refs)

    value_group = _vote_values(runs, tiebreak)
    if value_group is None:
        return _abstain(runs)
    if mode == "independent":
        refs = _vote_refs(runs, ignore_blank, tiebreak)[0].refs
    elif mode == "answer_priority":
        refs = _vote_refs(value_group, ignore_blank, tiebreak)[0].refs
    elif mode == "union":
        refs = tuple(dict.fromkeys(ref for run in value_group for ref in run.refs))
    elif mode == "majority":
        refs = tuple(dict.fromkeys(ref for run in runs for ref in run.refs))
    else:  # intersection
        common = set.intersection(*(set(run.refs) for run in value_group))
        refs = tuple(ref for ref in _base(value_group).refs if ref in common)
    return _result(value_group, refs)


# ── internals ──────────────────────────────────────────────────────────────


def _read(index: int, answer: Answer) -> _Run:
    blank = answer.is_blank or is_blank_value(answer.answer_value)
    unit = answer.answer_unit
    value = ParsedValue("blank", "is_blank") if blank else in_unit(parse_value(answer.answer_value), unit)
    return _Run(index, answer, value, parse_ref_ids(answer.ref_id))


def _same_value(a: ParsedValue, b: ParsedValue) -> bool:
    shape = {"boolean": "number"}
    if shape.get(a.kind, a.kind) != shape.get(b.kind, b.kind):
        return False
    if a.kind == "blank":
        return True
    if a.kind == "text":
        as_lists = same_list(a.value, b.value)  # "(3,5)" and "(5, 3)" are one answer
        return as_lists if as_lists is not None else canon_text(a.value) == canon_text(b.value)
    return all(abs(y - x) <= _GROUP_TOL * abs(x) for x, y in zip(a.numbers, b.numbers, strict=True))


def _group(runs: Sequence[_Run], same: Callable[[_Run, _Run], bool]) -> list[list[_Run]]:
    """Groups in order of first appearance; a run joins the first group whose first
    member it equals."""
    groups: list[list[_Run]] = []
    for run in runs:
        for group in groups:
            if same(group[0], run):
                group.append(run)
                break
        else:
            groups.append([run])
    return groups


def _pick(groups: list[list[_Run]], tiebreak: str, ref_size: Callable[[list[_Run]], int]) -> list[_Run] | None:
    """The largest group; ties per `tiebreak` (None = abstain, for tiebreak "blank")."""
    top = max(len(g) for g in groups)
    tied = [g for g in groups if len(g) == top]  # already in order of first appearance
    if len(tied) == 1:
        return tied[0]
    if tiebreak == "blank":
        return None
    if tiebreak == "shortest_ref":
        return min(tied, key=ref_size)  # min keeps the first of equals
    if tiebreak == "highest_confidence":
        if all(_best_confidence(g) == float("-inf") for g in tied):
            raise ValueError("tiebreak 'highest_confidence' needs Answer.confidence on the tied runs; none has one")
        return max(tied, key=_best_confidence)  # max keeps the first of equals
    return tied[0]


def _best_confidence(group: Sequence[_Run]) -> float:
    return max((r.answer.confidence for r in group if r.answer.confidence is not None), default=float("-inf"))


def _vote_values(runs: Sequence[_Run], tiebreak: str) -> list[_Run] | None:
    groups = _group(runs, lambda a, b: _same_value(a.value, b.value))
    return _pick(groups, tiebreak, lambda g: len(_base(g).refs))


def _vote_refs(runs: Sequence[_Run], ignore_blank: bool, tiebreak: str) -> list[_Run]:
    """Runs citing the winning ref set (compared as sets)."""
    if ignore_blank and any(r.refs for r in runs):
        runs = [r for r in runs if r.refs]
    groups = _group(runs, lambda a, b: set(a.refs) == set(b.refs))
    # "blank" is about abstaining on the answer; a tied ref vote falls back to "first".
    picked = _pick(groups, "first" if tiebreak == "blank" else tiebreak, lambda g: len(g[0].refs))
    return picked if picked is not None else groups[0]


def _representative(group: Sequence[_Run]) -> str:
    counts = Counter(run.value.value for run in group)
    top = max(counts.values())
    tied = [value for value in counts if counts[value] == top]  # insertion order = run order
    if len(tied) == 1 or group[0].value.kind not in ("number", "boolean", "range"):
        return tied[0]
    numbers = {run.value.value: run.value.numbers for run in group}
    ordered = sorted(tied, key=lambda v: numbers[v])
    return ordered[(len(ordered) - 1) // 2]


def _base(group: Sequence[_Run]) -> _Run:
    """The earliest run of the group that gave its representative value."""
    chosen = _representative(group)
    return next(run for run in group if run.value.value == chosen)


def _result(group: Sequence[_Run], refs: tuple[str, ...]) -> Answer:
    base = _base(group)
    if base.blank:
        # An abstention cites nothing, whatever other runs cited (WattBot's NA point needs both).
        return _abstain(group)
    # The canonical value, so "1,000" and "1000" runs yield the same output.
    return dataclasses.replace(base.answer, answer_value=base.value.value, is_blank=base.blank, ref_id=refs)


def _abstain(runs: Sequence[_Run]) -> Answer:
    return Answer.blank(runs[0].answer.answer_unit)
