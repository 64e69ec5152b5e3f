"""The WattBot 2026 metric and `kohaku score`, on small gold/submission files written here.

Per question: 0.75·value + 0.20·ref(F1) + 0.05·abstention (1 on an answerable question);
final = their mean, as the official 2026 scorer. Every expected number is worked
out by hand in the comments next to it.
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import pytest

from kohaku_assets.cli import main as cli_main
from kohaku_rag.answers.question_files import load_questions
from kohaku_rag.answers.records import BLANK, Answer, Question
from kohaku_rag.answers.values import read_value, values_match
from kohaku_rag.evaluation.metrics import score_with
from kohaku_rag.evaluation.submissions import load_submission, write_submission_csv
from kohaku_rag.evaluation.wattbot2026 import abstained, components, ref_f1, totals

FLAGS = ("Quote", "Table", "Figure", "Math", "is_NA", "CrossPaper", "Reconcile")
GOLD_HEADER = ("id", "question", "answer", "answer_value", "answer_unit", "ref_id", "ref_url",
               "supporting_materials", "explanation", *FLAGS, "Cohort", "Corrected")  # fmt: skip
SUB_HEADER = ("id", "question", "answer", "answer_value", "answer_unit", "ref_id", "ref_url",
              "supporting_materials", "explanation")  # fmt: skip

# id, answer_value, unit, ref_id, flags
GOLD = [
    ("g1", "1438", "lbs", "['a']", {"Quote"}),
    ("g2", "0.0005", "kWh", "['b']", {"Table", "Math"}),
    ("g3", "ML.ENERGY Benchmark", "is_blank", "['c']", {"Quote"}),
    ("g4", "[10,20]", "percent", "['a','b','c','d']", {"Figure"}),
    ("g5", "(3,5)", "GPUs", "['a','e']", {"CrossPaper", "Reconcile"}),
    ("g6", "is_blank", "MWh", "is_blank", {"is_NA"}),
    ("g7", "is_blank", "is_blank", "is_blank", {"is_NA"}),
    ("g8", "1", "is_blank", "['d']", set()),
    ("g9", "is_blank", "is_blank", "is_blank", {"is_NA"}),
]
# id, answer_value, unit, ref_id, ref_url, supporting_materials
SUBMISSION = [
    ("g1", "1,438 lbs", "lbs", "['a']", "['u']", "quote"),  # value 1, ref 1
    ("g2", "0.0014", "kWh", "['b']", "['u']", "t"),  # |0.0014-0.0005| <= abs 1e-3: value 1, ref 1
    ("g3", "the ml energy benchmark", "is_blank", "['c','x']", "['u','v']", "q"),  # value 1, ref F1 2/3
    ("g4", "15", "percent", "['a']", "['u']", "fig"),  # inside the range: 1; ref 2·1·.25/1.25 = 0.4
    ("g5", "3", "GPUs", "['a','e']", "['u','v']", "r"),  # one list member alone: 0; ref 1
    ("g6", "is_blank", "MWh", "is_blank", "is_blank", "is_blank"),  # value 1, ref 1, abstained
    ("g7", "is_blank", "kWh", "['a']", "['u']", "is_blank"),  # value 1, ref 0, cites: not abstained
    # g8 missing: an abstention; value 0 (gold 1), ref 0 (gold d)
    ("g9", "42", "is_blank", "is_blank", "is_blank", "made up"),  # false answer: value 0, ref 1, na 0
    ("zz", "1", "is_blank", "['a']", "['u']", "x"),  # not in the gold file: ignored
]


def _write_gold(path: Path) -> Path:
    with path.open("w", encoding="utf-8-sig", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\r\n")  # BOM + CRLF, as Kaggle ships them
        writer.writerow(GOLD_HEADER)
        for qid, value, unit, refs, flags in GOLD:
            blank = value == "is_blank"
            writer.writerow([qid, f"question {qid}?", "x", value, unit, refs, refs, "is_blank" if blank else "s",
                             "e", *(int(f in flags) for f in FLAGS), "A", "0"])  # fmt: skip
    return path


def _write_submission(path: Path, rows: list[tuple[str, ...]] = SUBMISSION) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(SUB_HEADER)
        for qid, value, unit, refs, urls, materials in rows:
            writer.writerow([qid, "q?", value, value, unit, refs, urls, materials, "e"])
    return path


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    return _write_gold(tmp_path / "gold.csv"), _write_submission(tmp_path / "sub.csv")


def _value(gold: str, pred: str, unit: str = "is_blank") -> bool:
    return values_match(read_value(gold, unit), read_value(pred, unit))


# ── the value rule ─────────────────────────────────────────────────────────


@pytest.mark.parametrize(
    ("gold", "pred", "unit", "right"),
    [
        ("1000", "1000.9", "kWh", True),  # |0.9| <= 1e-3 × 1000.9
        ("1000", "1001.5", "kWh", False),  # 1.5 > 1.0015
        ("0.0005", "0.0014", "kWh", True),  # absolute fallback 1e-3
        ("0.0005", "0.0016", "kWh", False),  # 0.0011 > 1e-3
        ("0", "0.0009", "kWh", True),
        ("1438", "1,438 lbs", "lbs", True),  # read leniently, unit echo dropped
        ("5400000", "5.4 million", "liters", True),
        ("1", "TRUE", "is_blank", True),  # True/False are 1/0
        ("0", "False", "is_blank", True),
        ("1", "0", "is_blank", False),
        ("ML.ENERGY Benchmark", "the ml energy  benchmark.", "is_blank", True),  # case, punctuation, space, article
        ("NVIDIA A100", "NVIDIA A100 GPU", "GPU", True),  # a trailing echo of the unit
        ("NVIDIA A100", "NVIDIA A100 GPU", "is_blank", False),
        ("BLOOM", "BLOOMZ", "is_blank", False),
    ],
)
def test_numbers_and_text(gold: str, pred: str, unit: str, right: bool) -> None:
    assert _value(gold, pred, unit) is right


@pytest.mark.parametrize(
    ("pred", "right"),
    [
        ("15", True),  # any single number inside
        ("10", True),
        ("20.01", True),  # within the tolerance of an end (|0.01| <= 0.02001)
        ("25", False),
        ("9", False),
        ("[10,20]", True),  # the same range
        ("[20, 10]", True),
        ("10-20", True),  # written as text
        ("(10, 20)", True),  # a two-number list naming the ends
        ("[10,25]", False),
        ("is_blank", False),
    ],
)
def test_a_gold_range(pred: str, right: bool) -> None:
    assert _value("[10,20]", pred, "percent") is right


@pytest.mark.parametrize(
    ("gold", "pred", "right"),
    [
        ("(3,5)", "(5, 3)", True),  # every member, any order
        ("(3,5)", "[3,5]", True),
        ("(3,5)", "{5,3}", True),
        ("(3,5)", "3", False),  # one value alone
        ("(3,5)", "(3)", False),
        ("(3,5)", "(3,5,7)", False),  # an extra member
        ("(3,5)", "(3,3)", False),
        ("(3,5)", "(3.002, 5 GPUs)", True),  # members read like single values
        ("(GPT-3, BLOOM)", "{bloom, gpt-3}", True),  # a set of terms
        ("(GPT-3, BLOOM)", "{bloom, bloom, gpt-3}", True),  # a set: repeats collapse
        ("(GPT-3, BLOOM)", "(GPT-3, OPT)", False),
        ("(1,000, 2,000)", "(2000, 1000)", True),  # thousands separators inside a list
    ],
)
def test_a_gold_list(gold: str, pred: str, right: bool) -> None:
    assert _value(gold, pred, "GPUs") is right


def test_a_set_answer_to_a_single_term() -> None:
    assert _value("BLOOM", "{bloom}")
    assert not _value("BLOOM", "{bloom, opt}")


def test_reference_f1() -> None:
    assert ref_f1(("a", "b", "c", "d"), ("a",)) == pytest.approx(0.4)  # one of four
    assert ref_f1(("a",), ("a", "e")) == pytest.approx(2 / 3)  # P 1/2, R 1
    assert ref_f1((), ()) == 1.0
    assert ref_f1(("a",), ()) == 0.0
    assert ref_f1((), ("a",)) == 0.0


def _q(value: str, refs: tuple[str, ...] = ("a",), unit: str = "kWh") -> Question:
    blank = value == BLANK
    return Question("q", "?", unit, Answer("x", value, unit, () if blank else refs, is_blank=blank))


def test_unanswerable_needs_every_evidence_field_blank() -> None:
    q = _q(BLANK)
    full = Answer.blank("kWh")
    assert components(q, full).value == 1.0 and components(q, full).abstention == 1.0
    for field, filled in (("ref_id", ("a",)), ("ref_url", "['https://x']"), ("supporting_materials", "a quote")):
        pred = Answer(**{**full.__dict__, field: filled})
        c = components(q, pred)
        assert (c.value, c.abstention) == (1.0, 0.0), field  # the value is blank, the refusal still cites
    answered = Answer("42", "42", "kWh", ())
    assert (components(q, answered).value, components(q, answered).abstention) == (0.0, 0.0)


def test_unit_weighs_nothing() -> None:
    q = _q("12")
    right = components(q, Answer("12", "12", "kWh", ("a",)))
    wrong_unit = components(q, Answer("12", "12", "MWh", ("a",)))
    assert (right.unit, wrong_unit.unit) == (1.0, 0.0)
    report = score_with("wattbot2026", [q], {"q": Answer("12", "12", "MWh", ("a",))})
    assert report.final == pytest.approx(1.0)  # 0.75 + 0.20 + 0.05 (no unanswerable: rate 1)


def test_the_abstention_check_is_averaged_over_every_question_as_the_leaderboard() -> None:
    """the official scorer averages the clean-refusal check over all questions (an
    answerable one counts 1); averaging over the unanswerable ones only scored 0.808 where the
    leaderboard said 0.857. Three answerable questions right and cited, one unanswerable
    answered: value 3/4, ref 3/4 (the false answer cites a document the blank gold has not),
    abstention (1+1+1+0)/4 = 3/4, final 0.75·3/4 + 0.20·3/4 + 0.05·3/4 = 0.75 (the mean of the
    row totals 1, 1, 1, 0); over the unanswerable one alone it was 0.7125."""
    questions = [replace(_q("12"), id=f"a{i}") for i in range(3)] + [replace(_q(BLANK), id="u")]
    preds = {f"a{i}": Answer("12", "12", "kWh", ("a",)) for i in range(3)} | {"u": Answer("7", "7", "kWh", ("a",))}
    report = score_with("wattbot2026", questions, preds)
    assert report.na == pytest.approx(0.75)
    assert report.final == pytest.approx(0.75)
    assert report.final == pytest.approx(sum(r.total for r in report.rows) / 4)
    assert totals(questions, preds).final == pytest.approx(0.75)
    assert totals(questions, preds).na == pytest.approx(0.75)


# ── a whole file ───────────────────────────────────────────────────────────


def test_the_2026_file_score_by_hand(files: tuple[Path, Path]) -> None:
    gold, sub = files
    report = score_with("wattbot2026", load_questions(gold), load_submission(sub))
    by_id = {r.id: r for r in report.rows}
    assert [(by_id[q].value, round(by_id[q].ref, 4)) for q in sorted(by_id)] == [
        (1.0, 1.0), (1.0, 1.0), (1.0, 0.6667), (1.0, 0.4), (0.0, 1.0), (1.0, 1.0), (1.0, 0.0), (0.0, 0.0), (0.0, 1.0)
    ]  # fmt: skip
    # value 6/9; ref (1+1+2/3+0.4+1+1+0+0+1)/9 = 6.0667/9; abstention: the 6 answerable count 1,
    # g6 yes, g7 cites, g9 answers -> 7/9
    assert report.value == pytest.approx(6 / 9)
    assert report.ref == pytest.approx((6 + 2 / 3 - 0.6) / 9)
    assert report.na == pytest.approx(7 / 9)
    assert report.final == pytest.approx(0.75 * 6 / 9 + 0.20 * (6 + 2 / 3 - 0.6) / 9 + 0.05 * 7 / 9)  # 0.6737037
    assert report.false_answer_rate == pytest.approx(1 / 3)  # g9 of g6, g7, g9
    assert report.blank_rate == pytest.approx(3 / 9)  # g6, g7 and the missing g8
    # the abstention policy's two losses: g9 answered of the 3 unanswerable; the
    # missing g8 refused of the 6 answerable
    assert (report.false_answers, report.false_refusals, report.false_refusal_rate) == (1, 1, pytest.approx(1 / 6))
    assert "false answers 1 of 3 unanswerable; false refusals 1 of 6 answerable (0.1667)" in "\n".join(report.lines())
    # pooled refs: cited 1+1+2+1+2+0+1+0+0 = 8, of which gold 6; gold ids 1+1+1+4+2+0+0+1+0 = 10
    assert (report.ref_precision, report.ref_recall) == (pytest.approx(0.75), pytest.approx(0.6))
    assert report.unit == pytest.approx(8 / 9)  # g7 answered kWh for is_blank
    assert report.missing == ("g8",) and report.extra == ("zz",)
    flags = {k: (v.n, v.wrong) for k, v in report.per_flag.items()}
    assert flags == {"Quote": (2, 0), "Table": (1, 0), "Figure": (1, 0), "Math": (1, 0), "is_NA": (3, 1),
                     "CrossPaper": (1, 1), "Reconcile": (1, 1)}  # fmt: skip


def test_the_2025_metric_on_the_same_files_is_unchanged(files: tuple[Path, Path]) -> None:
    gold, sub = files
    report = score_with("wattbot2025", load_questions(gold), load_submission(sub))
    # 2025: value g1 g3 g6 g7 = 4/9 (no abs fallback for g2, no number inside a range for g4,
    # no lists for g5); Jaccard 1+1+.5+.25+1+1+0+0+1 = 5.75; na 1 on answerable (6) + g6 = 7
    assert report.value == pytest.approx(4 / 9)
    assert report.ref == pytest.approx(5.75 / 9)
    assert report.na == pytest.approx(7 / 9)
    assert report.final == pytest.approx((0.75 * 4 + 0.15 * 5.75 + 0.10 * 7) / 9)  # 0.5069444


def test_kohaku_score_json(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    gold, sub = files
    assert cli_main(["score", "--questions", str(gold), "--submission", str(sub), "--metric", "wattbot2026",
                     "--json"]) == 0  # fmt: skip
    out = capsys.readouterr()
    summary = json.loads(out.out.strip().splitlines()[-1])
    assert list(summary)[:6] == ["final", "value", "ref", "na", "n", "per_flag"]
    assert summary["final"] == round(0.75 * 6 / 9 + 0.20 * (6 + 2 / 3 - 0.6) / 9 + 0.05 * 7 / 9, 4) == 0.6737
    assert (summary["n"], summary["na"], summary["metric"]) == (9, 0.7778, "wattbot2026")
    assert summary["per_flag"]["Reconcile"] == {"n": 1, "wrong": 1, "wrong_rate": 1.0}
    assert (summary["false_answers"], summary["false_refusals"], summary["false_refusal_rate"]) == (1, 1, 0.1667)
    assert "wattbot2026 score 0.6737" in out.err and "g8" not in out.out


def test_kohaku_score_defaults_to_2025(files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    gold, sub = files
    assert cli_main(["score", "--questions", str(gold), "--submission", str(sub), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["final"] == round(4.5625 / 9, 4)


def test_a_file_without_flags_has_no_per_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gold = tmp_path / "gold.csv"
    gold.write_text("id,question,answer_value,answer_unit,ref_id\nq1,?,12,kWh,['a']\n", encoding="utf-8")
    sub = _write_submission(tmp_path / "sub.csv", [("q1", "12", "kWh", "['a']", "['u']", "s")])
    assert cli_main(["score", "--questions", str(gold), "--submission", str(sub), "--metric", "wattbot2026",
                     "--json"]) == 0  # fmt: skip
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert (summary["final"], summary["per_flag"]) == (1.0, {})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("id,answer_value\nq1,12\n", "missing column(s) ref_id"),
        ("id,answer_value,ref_id\nq1,12,['a']\nq1,13,['a']\n", "'q1' appears more than once (row 3)"),
        ("id,answer_value,ref_id\nq1,12,a,b\n", "row 2 has more fields"),
    ],
)
def test_a_bad_submission_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    gold = _write_gold(tmp_path / "gold.csv")
    sub = tmp_path / "sub.csv"
    sub.write_text(content, encoding="utf-8")
    assert cli_main(["score", "--questions", str(gold), "--submission", str(sub)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(sub) in err and "Traceback" not in err


def test_a_bad_flag_cell_is_named(tmp_path: Path) -> None:
    gold = tmp_path / "gold.csv"
    gold.write_text("id,question,answer_value,answer_unit,Table\nq1,?,12,kWh,maybe\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"row 2 column Table: expected 0 or 1, got 'maybe'"):
        load_questions(gold)


def test_a_blank_answer_blanks_every_evidence_field_in_the_submission(tmp_path: Path) -> None:
    """What the pipeline writes for an abstention earns the 2026 abstention point, even when
    the model's blank reply still listed documents and a quote."""
    questions = [_q(BLANK)]
    leaky = Answer("Unable to answer", "is_blank", "kWh", ("a",), "no", True, "a quote")
    path = write_submission_csv(tmp_path / "sub.csv", questions, {"q": leaky}, {"a": "https://x/a.pdf"})
    row = next(csv.DictReader(path.open(encoding="utf-8")))
    assert [row[c] for c in ("answer_value", "ref_id", "ref_url", "supporting_materials", "explanation")] == [BLANK] * 5
    read = load_submission(path)["q"]
    assert abstained(read)
    assert score_with("wattbot2026", questions, {"q": read}).final == pytest.approx(1.0)


def test_a_gold_file_without_answers_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gold = tmp_path / "test_Q.csv"
    gold.write_text("id,question,answer_value,answer_unit,ref_id\nq1,?,,kWh,\n", encoding="utf-8")
    sub = _write_submission(tmp_path / "sub.csv", [("q1", "12", "kWh", "['a']", "['u']", "s")])
    assert cli_main(["score", "--questions", str(gold), "--submission", str(sub)]) == 2
    assert "no gold answers" in capsys.readouterr().err
