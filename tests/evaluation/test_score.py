"""WattBot scoring, error taxonomy and submission CSV; totals worked out by hand.

Per question: total = 0.75·value + 0.15·ref + 0.10·na.
"""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import pytest

from kohaku_rag.answers.question_files import load_questions
from kohaku_rag.answers.records import BLANK_TEXT, Answer, Question
from kohaku_rag.evaluation.submissions import format_ref_list, load_ref_urls, to_submission_rows, write_submission_csv
from kohaku_rag.evaluation.wattbot2025 import ERROR_TYPES, score_predictions, score_question
from tests.support.shared_data import WATTBOT

KNOWN_IDS = list(load_ref_urls(WATTBOT / "metadata.csv"))


def _gold(value: str, refs: tuple[str, ...] = ("patterson2021",), unit: str = "tCO2e", qid: str = "q1") -> Question:
    blank = value == "is_blank"
    answer = Answer(BLANK_TEXT if blank else value, value, unit, () if blank else refs, is_blank=blank)
    return Question(qid, "a question?", unit, answer)


def _pred(value: str, refs: tuple[str, ...] = ("patterson2021",), unit: str = "tCO2e") -> Answer:
    return Answer(value, value, unit, refs, explanation="e")


def _score(gold: Question, pred: Answer | None, **kw: object) -> tuple[float, float, float, float, str]:
    row = score_question(gold, pred, **kw)  # type: ignore[arg-type]
    return row.value, row.ref, row.na, round(row.total, 10), row.error_type


# ── value component ────────────────────────────────────────────────────────


def test_exact_number() -> None:
    # 0.75 + 0.15 + 0.10 = 1.0
    assert _score(_gold("4.3"), _pred("4.3")) == (1, 1, 1, 1.0, "correct")


def test_e_notation_and_formatted_predictions_match_plain_gold() -> None:
    assert _score(_gold("1.01E+11"), _pred("101000000000"))[0] == 1  # gold in Excel E-notation
    assert _score(_gold("101000000000"), _pred("1.01E+11"))[0] == 1
    assert _score(_gold("1438", unit="lbs"), _pred("1,438 lbs"))[0] == 1
    assert _score(_gold("5439000", unit="liters"), _pred("5.439 million liters"))[0] == 1
    assert _score(_gold("2510000", unit="USD"), _pred("$2.51 million"))[0] == 1
    assert _score(_gold("85.5", unit="percent"), _pred("85.5%"))[0] == 1


def test_tolerance_is_0_1_percent_of_gold() -> None:
    # gold 1438: band is ±1.438.  1439.4 is 1.4 away -> match; 1439.5 is 1.5 away -> miss.
    assert _score(_gold("1438"), _pred("1439.4"))[0] == 1
    assert _score(_gold("1438"), _pred("1436.562"))[0] == 1  # exactly on the edge, exact Decimal maths
    # miss: value 0, ref 1, na 1 -> 0.15 + 0.10 = 0.25; 0.1 % < 0.104 % < 5 % -> rounding
    assert _score(_gold("1438"), _pred("1439.5")) == (0, 1, 1, 0.25, "rounding")


def test_zero_gold_needs_exact_zero() -> None:
    assert _score(_gold("0", unit="is_blank"), _pred("0"))[0] == 1
    assert _score(_gold("0", unit="is_blank"), _pred("0.0001"))[0] == 0


def test_true_false_are_one_and_zero() -> None:
    assert _score(_gold("1", unit="is_blank"), _pred("TRUE"))[0] == 1
    assert _score(_gold("0", unit="is_blank"), _pred("False"))[0] == 1
    assert _score(_gold("0", unit="is_blank"), _pred("no"))[0] == 1
    # wrong boolean, right document: 0.25, value_selection
    assert _score(_gold("0", unit="is_blank"), _pred("TRUE")) == (0, 1, 1, 0.25, "value_selection")


def test_ranges_endpoint_wise() -> None:
    gold = _gold("[300,1000]", ("samsi2024",), unit="W")
    for spelling in ("[300,1000]", "[300, 1000]", "300 to 1000", "300-1000 W", "between 300 and 1000"):
        assert _score(gold, _pred(spelling, ("samsi2024",), "W"))[0] == 1, spelling
    assert _score(gold, _pred("[300,1001]", ("samsi2024",)))[0] == 1  # 1 <= 0.1 % of 1000
    # 1002 is 0.2 % off the upper end: 0.25, rounding
    assert _score(gold, _pred("[300,1002]", ("samsi2024",))) == (0, 1, 1, 0.25, "rounding")
    assert _score(gold, _pred("[301,1000]", ("samsi2024",)))[0] == 0  # 1 > 0.3


def test_range_with_thousands_separator_inside() -> None:
    gold = _gold("[1,000,2,000]", unit="MWh")
    assert _score(gold, _pred("[1000,2000]"))[0] == 1
    assert _score(gold, _pred("1,000 to 2,000"))[0] == 1
    assert _score(_gold("[1000,2000]"), _pred("[1,000, 2,000]"))[0] == 1


def test_range_against_number_is_a_type_mismatch() -> None:
    # 85 lies inside [80,90] but WattBot ranges are compared endpoint-wise: 0.25
    assert _score(_gold("[80,90]", ("chung2025",), "percent"), _pred("85", ("chung2025",))) == (
        0, 1, 1, 0.25, "type_mismatch",
    )  # fmt: skip
    assert _score(_gold("13", unit="days"), _pred("[12,14]"))[4] == "type_mismatch"


def test_categorical_answers_after_normalisation() -> None:
    gold = _gold("ML.ENERGY Benchmark", ("chung2025",), unit="is_blank")  # train q003 answer_value
    for spelling in ("The ML.ENERGY Benchmark", "ml.energy benchmark ", "ML ENERGY benchmark."):
        assert _score(gold, _pred(spelling, ("chung2025",)))[0] == 1, spelling
    assert _score(gold, _pred("ML.ENERGY Leaderboard", ("chung2025",))) == (0, 1, 1, 0.25, "value_selection")
    # text gold, number prediction
    assert _score(_gold("GPT-3", unit="is_blank"), _pred("175"))[4] == "type_mismatch"


# ── NA handling ────────────────────────────────────────────────────────────


def test_unanswerable_gold_with_unit_filled() -> None:
    gold = _gold("is_blank", unit="MWh")  # like train q062: unit MWh, everything else is_blank
    # blank prediction: value 1, ref 1 (both empty), na 1 -> 1.0
    assert _score(gold, Answer.blank("MWh")) == (1, 1, 1, 1.0, "correct")
    assert _score(gold, None) == (1, 1, 1, 1.0, "correct")  # missing counts as blank
    # a made-up answer: value 0, ref 0 (gold empty, pred not), na 0 -> 0.0
    assert _score(gold, _pred("500", ("patterson2021",))) == (0, 0, 0, 0.0, "false_answer")
    # a made-up answer without citations still gets no value/NA credit: ref 1 only -> 0.15
    assert _score(gold, _pred("500", ())) == (0, 1, 0, 0.15, "false_answer")
    # abstained but cited a document: value 1, ref 0, na 0 (KohakuRAG: ref_id must be blank too) -> 0.75
    blank_with_refs = dataclasses.replace(Answer.blank("MWh"), ref_id=("patterson2021",))
    assert _score(gold, blank_with_refs) == (1, 0, 0, 0.75, "reference_mismatch")


def test_abstaining_on_an_answerable_question() -> None:
    # value 0, ref 0 (gold cites, pred does not), na 1 (answerable gold always earns it) -> 0.10
    assert _score(_gold("4.3"), Answer.blank("tCO2e")) == (0, 0, 1, 0.1, "unnecessary_abstention")
    assert _score(_gold("4.3"), None) == (0, 0, 1, 0.1, "unnecessary_abstention")
    # is_blank flag wins over a stray value
    flagged = dataclasses.replace(_pred("4.3"), is_blank=True)
    assert _score(_gold("4.3"), flagged)[4] == "unnecessary_abstention"


# ── ref component ──────────────────────────────────────────────────────────


def test_ref_jaccard_partial_and_normalised() -> None:
    gold = _gold("1", ("wu2021b", "patterson2021"), unit="is_blank")  # train q075
    # |{wu2021b}| / |{wu2021b, patterson2021}| = 0.5 -> 0.75 + 0.075 + 0.10 = 0.925
    assert _score(gold, _pred("TRUE", ("wu2021b",))) == (1, 0.5, 1, 0.925, "reference_mismatch")
    # extra id: 2/3 -> 0.75 + 0.1 + 0.1 = 0.95
    assert _score(gold, _pred("1", ("wu2021b", "patterson2021", "li2025b")))[3] == 0.95
    # case, whitespace, order and duplicates do not matter
    assert _score(gold, _pred("1", (" Patterson2021", "WU2021B ", "wu2021b")))[1] == 1


def test_bare_and_spaced_ref_spellings_from_the_file() -> None:
    gold = load_questions(WATTBOT / "train_QA.csv")
    by_id = {q.id: q for q in gold}
    assert _score(by_id["q207"], _pred("0", ("luccioni2025b",)))[3] == 1.0  # gold ref is bare
    spaced = Answer("1.3", "1.3", "household-years", ("dodge2022", " strubell2019"))
    assert _score(by_id["q272"], spaced)[3] == 1.0


def test_typo_ref_ids_resolved_with_known_ids() -> None:
    gold = _gold("3", ("cottier2025",), unit="x")  # README: cottier2025 is a typo for cottier2024
    # without the corpus ids: value 1, ref 0, na 1 -> 0.85
    assert _score(gold, _pred("3", ("cottier2024",))) == (1, 0, 1, 0.85, "reference_mismatch")
    assert _score(gold, _pred("3", ("cottier2024",)), known_ref_ids=KNOWN_IDS) == (1, 1, 1, 1.0, "correct")


# ── error taxonomy ─────────────────────────────────────────────────────────


def test_unit_conversion_errors() -> None:
    assert _score(_gold("5439000", unit="liters"), _pred("5.439"))[4] == "unit_conversion"  # 10^6
    assert _score(_gold("0.18", unit="L/kWh"), _pred("18"))[4] == "unit_conversion"  # percent slip
    assert _score(_gold("1438", unit="lbs"), _pred("652.3"))[4] == "unit_conversion"  # kg for lb
    assert _score(_gold("24", unit="MWh"), _pred("24000"))[4] == "unit_conversion"
    assert _score(_gold("[300,1000]", unit="W"), _pred("[0.3,1]"))[4] == "unit_conversion"


def test_value_selection_versus_reference_mismatch() -> None:
    gold = _gold("4.3", ("patterson2021",))
    # wrong number from the right paper: 0 + 0.15 + 0.10 = 0.25
    assert _score(gold, _pred("24", ("patterson2021",))) == (0, 1, 1, 0.25, "value_selection")
    # half-right refs still count as the right document: 0.15·0.5 + 0.10 = 0.175
    assert _score(gold, _pred("24", ("patterson2021", "strubell2019"))) == (0, 0.5, 1, 0.175, "value_selection")
    # wrong number from the wrong paper: 0.10
    assert _score(gold, _pred("24", ("strubell2019",))) == (0, 0, 1, 0.1, "reference_mismatch")


def test_error_counts_cover_every_type() -> None:
    gold = [_gold("4.3", qid="a"), _gold("is_blank", qid="b", unit="MWh"), _gold("7", qid="c")]
    report = score_predictions(gold, {"a": _pred("4.3"), "b": _pred("1")})
    assert report.error_counts() == dict.fromkeys(ERROR_TYPES, 0) | {
        "correct": 1, "false_answer": 1, "unnecessary_abstention": 1,
    }  # fmt: skip


# ── aggregate ──────────────────────────────────────────────────────────────


def test_score_predictions_aggregate_by_hand() -> None:
    gold = [_gold("4.3", qid="a"), _gold("7", qid="b"), _gold("is_blank", qid="c", unit="MWh")]
    preds = {"a": _pred("4.3"), "c": _pred("12", ()), "zzz": _pred("1")}
    report = score_predictions(gold, preds)
    # a: 1.0 (1,1,1); b missing -> blank: 0.10 (0,0,1); c false answer, no refs: 0.15 (0,1,0)
    assert [round(r.total, 10) for r in report.rows] == [1.0, 0.1, 0.15]
    assert report.final == pytest.approx(1.25 / 3)
    assert (report.value, report.ref, report.na) == pytest.approx((1 / 3, 2 / 3, 2 / 3))
    # Kaggle 2025: NA as recall over the one unanswerable question = 0
    # 0.75·(1/3) + 0.15·(2/3) + 0.10·0 = 0.35
    assert report.na_recall == 0.0
    assert report.final_kaggle == pytest.approx(0.35)
    assert report.missing == ("b",) and report.extra == ("zzz",)


def test_train_gold_against_itself_scores_one() -> None:
    gold = load_questions(WATTBOT / "train_QA.csv")
    report = score_predictions(gold, {q.id: q.gold for q in gold})  # type: ignore[misc]
    assert report.final == 1.0 and report.final_kaggle == 1.0
    assert all(row.total == 1.0 and row.error_type == "correct" for row in report.rows)


def test_train_gold_against_all_blank_predictions() -> None:
    gold = load_questions(WATTBOT / "train_QA.csv")
    report = score_predictions(gold, {})
    # 41 questions, 2 unanswerable (q062, q164).
    # 39 answerable × (0·0.75 + 0·0.15 + 1·0.10) = 3.9;  2 unanswerable × 1.0 = 2.0
    # final = 5.9 / 41 = 0.14390...
    assert report.final == pytest.approx(5.9 / 41)
    assert (report.value, report.ref, report.na) == pytest.approx((2 / 41, 2 / 41, 1.0))
    # Kaggle form: 0.75·2/41 + 0.15·2/41 + 0.10·(2/2) = 1.8/41 + 0.1 = 5.9/41 as well
    assert report.na_recall == 1.0
    assert report.final_kaggle == pytest.approx(5.9 / 41)
    assert report.error_counts()["unnecessary_abstention"] == 39


def test_train_human_readable_answers_score_one() -> None:
    """Submitting the `answer` column ("5.439 million liters", "80-90%", "TRUE", "~13 days",
    "The ML.ENERGY Benchmark") as answer_value still scores 1.0."""
    gold = load_questions(WATTBOT / "train_QA.csv")
    preds = {q.id: dataclasses.replace(q.gold, answer_value=q.gold.answer) for q in gold}  # type: ignore[union-attr]
    assert score_predictions(gold, preds).final == 1.0


def test_scoring_refuses_questions_without_gold() -> None:
    test_questions = load_questions(WATTBOT / "test_Q_full.csv")
    with pytest.raises(ValueError, match="question q001: has no gold answer"):
        score_predictions(test_questions[:1], {})
    with pytest.raises(ValueError, match="repeated: a"):
        score_predictions([_gold("1", qid="a"), _gold("2", qid="a")], {})


# ── submission ─────────────────────────────────────────────────────────────


def test_format_ref_list() -> None:
    assert format_ref_list(["wu2021b", "patterson2021"]) == "['wu2021b','patterson2021']"
    assert format_ref_list([]) == "is_blank"


def test_submission_rows_follow_wattbot_conventions() -> None:
    questions = load_questions(WATTBOT / "test_Q_full.csv")[:3]
    urls = load_ref_urls(WATTBOT / "metadata.csv")
    preds = {
        "q001": Answer("4 percent", "4", "percent", ("Shehabi2016", "amazon2023")),
        "q002": Answer.blank("cars"),
        # q004 has no prediction
    }
    with pytest.raises(ValueError, match=r"question q001: ref_id shehabi2016 not in the metadata"):
        to_submission_rows(preds, questions, urls)
    preds["q001"] = Answer("4 percent", "4", "percent", ("amazon2023", "patterson2021"))
    rows = to_submission_rows(preds, questions, urls)
    assert [r["id"] for r in rows] == ["q001", "q002", "q004"]
    assert rows[0] | {"question": ""} == {
        "id": "q001", "question": "", "answer": "4 percent", "answer_value": "4", "answer_unit": "percent",
        "ref_id": "['amazon2023','patterson2021']",
        "ref_url": "['https://sustainability.aboutamazon.com/2023-amazon-sustainability-report.pdf',"
                   "'https://arxiv.org/pdf/2104.10350']",
        "supporting_materials": "is_blank", "explanation": "is_blank",
    }  # fmt: skip
    for row, unit in ((rows[1], "cars"), (rows[2], "data centers")):  # blank and missing
        assert row["answer"] == BLANK_TEXT and row["answer_unit"] == unit
        assert {row[k] for k in ("answer_value", "ref_id", "ref_url", "supporting_materials", "explanation")} == {
            "is_blank"
        }
    assert to_submission_rows(preds, questions)[0]["ref_url"] == "is_blank"  # no metadata given


def test_submission_csv_round_trips_train(tmp_path: Path) -> None:
    gold = load_questions(WATTBOT / "train_QA.csv")
    urls = load_ref_urls(WATTBOT / "metadata.csv")
    out = write_submission_csv(tmp_path / "sub" / "submission.csv", gold, {q.id: q.gold for q in gold}, urls)  # type: ignore[misc]
    raw = out.read_bytes()
    assert not raw.startswith(b"\xef\xbb\xbf") and b"\r" not in raw  # no BOM, LF line endings
    with out.open(newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    assert header == ["id", "question", "answer", "answer_value", "answer_unit", "ref_id", "ref_url",
                      "supporting_materials", "explanation"]  # fmt: skip
    reread = load_questions(out)
    assert [q.id for q in reread] == [q.id for q in gold]
    by_id = {q.id: q for q in reread}
    assert by_id["q207"].gold.ref_id == ("luccioni2025b",)  # type: ignore[union-attr]
    assert by_id["q062"].answer_unit == "MWh" and by_id["q062"].gold.is_blank  # type: ignore[union-attr]
    assert score_predictions(gold, {q.id: q.gold for q in reread}).final == 1.0  # type: ignore[misc]
    assert list(tmp_path.joinpath("sub").iterdir()) == [out]  # no temporary file left behind
