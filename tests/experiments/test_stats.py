"""Seed statistics, the ensemble-size curve and the paired bootstrap on hand-computed cases."""

import math
import random

import pytest

from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.evaluation.run_stats import _subsets, ensemble_curve, mean_sd, paired_bootstrap, run_finals
from kohaku_rag.progress import Ticker, format_eta, listening


def test_mean_sd_is_the_sample_sd():
    assert mean_sd([0.5, 0.7, 0.9]) == pytest.approx((0.7, 0.2))
    assert mean_sd([0.4]) == (0.4, 0.0)
    assert all(math.isnan(v) for v in mean_sd([]))


def _question(i: int) -> Question:
    gold = Answer(f"{i}0 W", f"{i}0", "W", (f"doc{i}",), "", False)
    return Question(f"q{i}", f"How many watts in case {i}?", "W", gold=gold)


def _answer(i: int, right: bool) -> Answer:
    value = f"{i}0" if right else "999"
    return Answer(f"{value} W", value, "W", (f"doc{i}",), "", False)


def test_run_finals_and_curve_by_hand():
    # 4 questions, 3 runs. A right answer with its ref scores 1.0; a wrong value with the
    # right ref scores 0.25 (0.15 ref + 0.10 not-NA), so a run's score is (right + 0.25 wrong) / 4.
    questions = [_question(i) for i in range(4)]
    right = [  # run -> which questions it gets right
        [True, True, True, False],
        [True, False, True, False],
        [False, True, True, True],
    ]
    runs = [{f"q{i}": _answer(i, r[i]) for i in range(4)} for r in right]
    finals = run_finals(questions, runs)
    assert finals == pytest.approx([(3 + 0.25) / 4, (2 + 0.5) / 4, (3 + 0.25) / 4])
    mean, sd = mean_sd(finals)
    assert mean == pytest.approx((3.25 + 2.5 + 3.25) / 12)
    # answer_priority, ties broken by the first run of the subset.
    # m=2: {0,1}: q0 r, q1 tie->run0 r, q2 r, q3 w -> 3.25; {0,2}: q0 tie->r, q1 r, q2 r, q3 tie->w -> 3.25;
    #      {1,2}: q0 tie->run1 r, q1 tie->run1 w, q2 r, q3 tie->run1 w -> 2.5.
    # m=3: q0 2 of 3 right, q1 2 of 3 right, q2 right, q3 1 of 3 right -> 3.25.
    curve = ensemble_curve(questions, runs, "answer_priority")
    assert curve == pytest.approx([mean, (3.25 + 3.25 + 2.5) / 12, 3.25 / 4])


def test_curve_subsets_are_capped_and_reproducible():
    assert len(_subsets(10, 5, 20)) == 20
    assert _subsets(10, 5, 20) == _subsets(10, 5, 20)
    assert _subsets(4, 2, 20) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]


def test_bootstrap_interval_contains_the_true_difference():
    # Synthetic per-question scores: b = a - 0.1 + noise (mean 0): the true difference is 0.1.
    rng = random.Random(7)
    a = [rng.random() for _ in range(400)]
    b = [x - 0.1 + rng.gauss(0, 0.05) for x in a]
    cmp = paired_bootstrap(a, b)
    assert cmp.low < 0.1 < cmp.high
    assert cmp.significant and cmp.questions == 400
    same = paired_bootstrap(a, [x + rng.gauss(0, 0.05) for x in a])
    assert same.low < 0 < same.high and not same.significant
    with pytest.raises(ValueError, match="differ in length"):
        paired_bootstrap([1.0], [1.0, 0.0])


def test_ticker_reports_done_total_and_eta():
    lines: list[str] = []
    seen: list[tuple[str, int, int]] = []
    with listening(lambda *event: seen.append(event)):
        ticker = Ticker("answered", 2, lines.append)
        ticker.tick("q1: ['4.3']")
        ticker.tick("q2: ['400']")
    ticker.tick("after")  # no listener any more
    assert lines[0].startswith("answered 1/2 q1: ['4.3'] (ETA ")
    assert "done in" in lines[1]
    assert seen == [("answered", 1, 2), ("answered", 2, 2)]
    assert format_eta(3725) == "1h02m" and format_eta(75) == "1m15s" and format_eta(4) == "4s"
