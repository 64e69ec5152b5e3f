"""Ensemble voting: every mode, ignore_blank, every tiebreak, numeric grouping."""

from __future__ import annotations

import pytest

from kohaku_rag.answers.records import BLANK_TEXT, Answer
from kohaku_rag.answers.vote import TIEBREAKS, VOTE_MODES, vote


def run(value: str, *refs: str, confidence: float | None = None, unit: str = "MWh") -> Answer:
    return Answer(value, value, unit, tuple(refs), explanation=f"run said {value}", confidence=confidence)


BLANK = Answer.blank("MWh")

# Five runs where every mode answers differently:
#   answers  10:2  20:2  30:1   -> 10 and 20 tie, 10 appears first -> 10
#   ref sets {a}:2 {b}:3
MIXED = [run("10", "a"), run("20", "b"), run("10", "a"), run("20", "b"), run("30", "b")]


def result(answer: Answer) -> tuple[str, tuple[str, ...]]:
    return answer.answer_value, answer.ref_id


def test_independent_votes_answer_and_refs_separately() -> None:
    # answer 10 (tie with 20, earlier); refs {b} (3 of 5) although no run said 10 with b
    assert result(vote(MIXED, "independent")) == ("10", ("b",))


def test_answer_priority_takes_refs_from_runs_with_the_winning_answer() -> None:
    # answer 10; among its runs refs {a}:2 -> a
    assert result(vote(MIXED, "answer_priority")) == ("10", ("a",))


def test_ref_priority_takes_the_answer_from_runs_with_the_winning_refs() -> None:
    # refs {b}:3 win; among those runs 20:2 beats 30:1
    assert result(vote(MIXED, "ref_priority")) == ("20", ("b",))


def test_union_and_intersection_of_agreeing_runs() -> None:
    runs = [run("10", "a", "b"), run("10", "C", "b"), run("20", "d"), run("10", "b", "a")]
    # answer 10 (3 runs); union keeps first-seen order, ids lower-cased
    assert result(vote(runs, "union")) == ("10", ("a", "b", "c"))
    # {a,b} ∩ {c,b} ∩ {b,a} = {b}
    assert result(vote(runs, "intersection")) == ("10", ("b",))
    # disagreeing refs can intersect to nothing
    assert result(vote([run("1", "a"), run("1", "b")], "intersection")) == ("1", ())


def test_result_keeps_the_winning_runs_other_fields() -> None:
    out = vote([run("7", "a", confidence=0.3), run("8", "b"), run("7", "a", confidence=0.9)], "answer_priority")
    assert (out.answer, out.explanation, out.confidence, out.answer_unit) == ("7", "run said 7", 0.3, "MWh")


@pytest.mark.parametrize("mode", VOTE_MODES)
def test_unanimous_runs_give_that_answer_in_every_mode(mode: str) -> None:
    answer = run("4.3", "patterson2021")
    assert vote([answer] * 3, mode) == answer


# ── grouping ───────────────────────────────────────────────────────────────


def test_numbers_within_0_1_percent_vote_together() -> None:
    # 1000, 1000.5 and 999.6 are within 0.1 % of 1000 (±1): 3 votes beat 2000's 2.
    runs = [run("1000", "a"), run("2000", "b"), run("1000.5", "a"), run("2000", "b"), run("999.6", "a")]
    # all three values appear once -> the median, 1000
    assert result(vote(runs, "answer_priority")) == ("1000", ("a",))
    # the most frequent member wins over the median
    runs = [run("1000.5"), run("1000"), run("1000.5"), run("3000"), run("3000")]
    assert vote(runs, "independent").answer_value == "1000.5"
    # an even tie takes the lower middle: sorted (999.6, 1000.5) -> 999.6
    runs = [run("1000.5"), run("999.6"), run("5")]
    assert vote(runs, "independent").answer_value == "999.6"
    # 1002 is 0.2 % away: its own group
    assert vote([run("1000"), run("1002"), run("1002")], "independent").answer_value == "1002"


def test_spellings_of_one_value_vote_together_and_come_out_canonical() -> None:
    out = vote([run("1,000"), run("2000"), run("1000"), run("2000"), run("1000.0")], "independent")
    assert out.answer_value == "1000"
    out = vote([run("[300,1000]"), run("300-1000"), run("[300,2000]")], "independent")
    assert out.answer_value == "[300,1000]"
    out = vote([run("TRUE", unit="is_blank"), run("0"), run("1")], "independent")
    assert out.answer_value == "1" and out.answer == "TRUE"  # TRUE and 1 are one group; TRUE came first
    out = vote([run("ML.ENERGY Benchmark"), run("GPT-3"), run("The ML.ENERGY Benchmark")], "independent")
    assert out.answer_value == "ML.ENERGY Benchmark"


def test_ref_sets_compare_as_sets() -> None:
    runs = [run("1", "a", "b"), run("1", "c"), run("1", "B", "A")]
    assert vote(runs, "independent").ref_id == ("a", "b")


# ── ignore_blank ───────────────────────────────────────────────────────────


def test_ignore_blank_drops_abstaining_runs() -> None:
    runs = [BLANK, BLANK, run("42", "a")]
    assert result(vote(runs, "answer_priority", ignore_blank=True)) == ("42", ("a",))
    out = vote(runs, "answer_priority", ignore_blank=False)  # 2 blanks outvote 1 answer
    assert out.is_blank and out.answer == BLANK_TEXT and out.answer_value == "is_blank"


def test_all_blank_runs_give_a_blank_answer() -> None:
    for ignore in (True, False):
        out = vote([BLANK, BLANK], "union", ignore_blank=ignore)
        assert out.is_blank and out.ref_id == () and out.answer_unit == "MWh"


def test_runs_with_a_blank_value_but_no_flag_are_blank_too() -> None:
    sloppy = Answer("n/a", "", "MWh", ())
    assert vote([sloppy, sloppy, run("3", "a")], "independent").answer_value == "3"
    assert vote([sloppy, sloppy, run("3", "a")], "independent", ignore_blank=False).is_blank


def test_a_winning_blank_cites_nothing() -> None:
    # The ref vote alone would pick ("a",); an abstention citing it would lose the NA point.
    for mode in ("independent", "answer_priority", "union"):
        out = vote([BLANK, BLANK, run("3", "a"), run("4", "a"), run("5", "a")], mode, ignore_blank=False)
        assert out.is_blank and out.ref_id == ()


def test_ignore_blank_drops_empty_ref_sets_from_ref_votes() -> None:
    runs = [run("42"), run("42"), run("42", "a")]
    assert vote(runs, "independent", ignore_blank=True).ref_id == ("a",)
    assert vote(runs, "independent", ignore_blank=False).ref_id == ()
    assert vote(runs, "ref_priority", ignore_blank=True).ref_id == ("a",)


# ── tiebreaks ──────────────────────────────────────────────────────────────

TIED = [run("10", "a", "b", confidence=0.2), run("20", "c", confidence=0.9)]


def test_tiebreak_first_is_the_earliest_run() -> None:
    assert result(vote(TIED, "answer_priority", tiebreak="first")) == ("10", ("a", "b"))
    assert result(vote(TIED[::-1], "answer_priority", tiebreak="first")) == ("20", ("c",))


def test_tiebreak_shortest_ref() -> None:
    assert result(vote(TIED, "answer_priority", tiebreak="shortest_ref")) == ("20", ("c",))
    # equal sizes fall back to the earliest
    assert vote([run("1", "a"), run("2", "b")], "union", tiebreak="shortest_ref").answer_value == "1"
    # in a ref-set vote it prefers the smaller set
    runs = [run("5", "a", "b"), run("5", "c")]
    assert vote(runs, "independent", tiebreak="shortest_ref").ref_id == ("c",)


def test_tiebreak_highest_confidence() -> None:
    assert result(vote(TIED, "answer_priority", tiebreak="highest_confidence")) == ("20", ("c",))
    # None ranks lowest
    runs = [run("1", "a"), run("2", "b", confidence=0.1)]
    assert vote(runs, "union", tiebreak="highest_confidence").answer_value == "2"
    with pytest.raises(ValueError, match="needs Answer.confidence"):
        vote([run("1"), run("2")], "union", tiebreak="highest_confidence")
    # no tie: confidences are not needed
    assert vote([run("1"), run("1"), run("2")], "union", tiebreak="highest_confidence").answer_value == "1"


def test_tiebreak_blank_abstains_on_a_tied_answer_vote() -> None:
    out = vote(TIED, "answer_priority", tiebreak="blank")
    assert out.is_blank and out.answer_unit == "MWh"
    assert vote([run("1"), run("1"), run("2")], "answer_priority", tiebreak="blank").answer_value == "1"
    # a tied ref-set vote falls back to the earliest set
    assert vote([run("5", "a"), run("5", "b")], "independent", tiebreak="blank").ref_id == ("a",)


def test_all_tiebreaks_are_tested() -> None:
    assert set(TIEBREAKS) == {"first", "shortest_ref", "highest_confidence", "blank"}


# ── errors ─────────────────────────────────────────────────────────────────


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="at least one answer"):
        vote([], "union")
    with pytest.raises(ValueError, match="unknown vote mode 'plurality'"):
        vote([run("1")], "plurality")
    with pytest.raises(ValueError, match="unknown tiebreak 'random'"):
        vote([run("1")], "union", tiebreak="random")


# ── the reference scripts' modes, and units ────────────────────────────────


def test_majority_unions_the_refs_of_every_run() -> None:
    # answer 10 (tie with 20, earlier); refs of all five runs: a, b
    assert result(vote(MIXED, "majority")) == ("10", ("a", "b"))
    # a blank run's refs are not counted (ignore_blank drops it first)
    assert result(vote([run("1", "a"), BLANK, run("1", "c")], "majority")) == ("1", ("a", "c"))


def test_first_non_blank_takes_the_first_answering_run_as_it_is() -> None:
    assert result(vote([BLANK, run("20", "b"), run("10", "a"), run("10", "a")], "first_non_blank")) == ("20", ("b",))
    assert vote([BLANK, BLANK], "first_non_blank").is_blank


def test_numbers_in_other_prefixes_of_the_questions_unit_are_one_answer() -> None:
    runs = [run("1.5 MW", "a", unit="MW"), run("1500000 W", "b", unit="MW"), run("1500 kW", "a", unit="MW")]
    runs.append(run("2", "c", unit="MW"))
    out = vote(runs, "answer_priority")
    assert (out.answer_value, out.ref_id) == ("1.5", ("a",))  # 3 runs against 1, in MW
    # W and Wh are different units: no conversion
    assert vote([run("1500 Wh", unit="MW"), run("2", unit="MW"), run("2", unit="MW")], "union").answer_value == "2"
    # no unit on the question: the three are three answers
    loose = [run("1.5 MW", unit="is_blank"), run("1500 kW", unit="is_blank"), run("7", unit="is_blank")]
    assert vote(loose, "union").answer_value == "1.5"
    assert vote(loose[1:] + loose[1:2], "union").answer_value == "1500"
