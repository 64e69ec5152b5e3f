"""Answer normalisation, ref-id parsing and question loading against every quirk listed in
the WattBot README (shared/wattbot/README.md)."""

from __future__ import annotations

import re
from decimal import Decimal
from pathlib import Path

import pytest

from kohaku_rag.answers.normalise import (
    canon_text,
    canonical_value,
    expand_stated_magnitude,
    is_blank_value,
    normalise_answer,
    parse_ref_ids,
    parse_value,
    resolve_ref_ids,
)
from kohaku_rag.answers.question_files import load_questions
from kohaku_rag.answers.records import BLANK_TEXT, Answer
from tests.support.shared_data import WATTBOT

KNOWN_IDS = [line.split(",")[0] for line in (WATTBOT / "metadata.csv").read_text().splitlines()[1:]]


@pytest.mark.parametrize(
    ("text", "kind", "value", "unit"),
    [
        # plain numbers, E-notation (Excel export habit), thousands separators
        ("64.7", "number", "64.7", None),
        ("1.01E+11", "number", "101000000000", None),
        ("2.5e-3", "number", "0.0025", None),
        ("1,438 lbs", "number", "1438", "lbs"),
        ("5,842", "number", "5842", None),
        ("13.20%", "number", "13.2", "percent"),  # train q158 answer
        ("85.5%", "number", "85.5", "percent"),
        ("55 percent", "number", "55", "percent"),
        # magnitude words are expanded (train q124, q316)
        ("5.439 million liters", "number", "5439000", "liters"),
        ("5.439 million", "number", "5439000", None),
        ("$2.51 million", "number", "2510000", "USD"),
        ("2.51 billion", "number", "2510000000", None),
        ("3 thousand", "number", "3000", None),
        ("2.5k GPUs", "number", "2500", "GPUs"),
        ("72B", "number", "72000000000", None),
        ("$4.33 per hour", "number", "4.33", "USD per hour"),
        # multipliers and hedges (train q106, q253, q221, q280)
        ("2x", "number", "2", "multiplier"),
        ("6.7x", "number", "6.7", "multiplier"),
        ("Up to 90%", "number", "90", "percent"),
        ("~13 days", "number", "13", "days"),
        ("approximately 0.18 L/kWh", "number", "0.18", "L/kWh"),
        ("-0.5", "number", "-0.5", None),
        # ranges, every spelling, with a thousands separator left inside
        ("300 to 1000", "range", "[300,1000]", None),
        ("300-1000", "range", "[300,1000]", None),
        ("300 \u2013 1000", "range", "[300,1000]", None),
        ("[300, 1000]", "range", "[300,1000]", None),
        ("[300,1000]", "range", "[300,1000]", None),
        ("[1,000,2,000]", "range", "[1000,2000]", None),
        ("[1,000, 2,000]", "range", "[1000,2000]", None),
        ("1,000 to 2,000", "range", "[1000,2000]", None),
        ("1000 to 300", "range", "[300,1000]", None),
        ("between 300 and 1000 W", "range", "[300,1000]", "W"),
        ("0.02 to 0.1 bottles", "range", "[0.02,0.1]", "bottles"),  # train q078 answer
        ("80-90%", "range", "[80,90]", "percent"),  # train q263 answer
        ("2.5-3 million", "range", "[2500000,3000000]", None),
        # True/False/yes/no
        ("TRUE", "boolean", "1", None),
        ("false", "boolean", "0", None),
        ("Yes.", "boolean", "1", None),
        ("no", "boolean", "0", None),
        # categorical text is kept as written
        ("ML.ENERGY Benchmark", "text", "ML.ENERGY Benchmark", None),
        ("GPT-3", "text", "GPT-3", None),
        ("3D parallelism", "text", "3D parallelism", None),
        ("4-bit", "text", "4-bit", None),
        ("64.7GB", "text", "64.7GB", None),  # glued unit without a known unit: not guessed
        ("1,5", "text", "1,5", None),  # not a thousands grouping
        ("[1,000,000]", "text", "[1,000,000]", None),  # ambiguous: a range? a number?
        # blanks
        ("is_blank", "blank", "is_blank", None),
        ("", "blank", "is_blank", None),
        (BLANK_TEXT, "blank", "is_blank", None),
    ],
)
def test_parse_value(text: str, kind: str, value: str, unit: str | None) -> None:
    parsed = parse_value(text)
    assert (parsed.kind, parsed.value, parsed.unit) == (kind, value, unit)


def test_parse_value_keeps_exact_decimals() -> None:
    assert parse_value("1.01E+11").numbers == (Decimal("101000000000"),)
    assert parse_value("0.1").numbers == (Decimal("0.1"),)  # no binary float drift
    assert parse_value("[0.02,0.1]").numbers == (Decimal("0.02"), Decimal("0.1"))


def test_expected_unit_echo_is_removed_before_reading_magnitudes() -> None:
    # The test file has unit "billion cubic meters": "billion" belongs to the unit.
    assert canonical_value("5.4 billion cubic meters", "billion cubic meters") == "5.4"
    assert canonical_value("5.4 billion", "billion cubic meters") == "5.4"
    # Without that unit the magnitude is expanded.
    assert canonical_value("5.4 billion", "cubic meters") == "5400000000"
    assert canonical_value("64.7GB", "GB") == "64.7"
    assert canonical_value("24MWh", "MWh") == "24"
    assert canonical_value("43 percent", "percent") == "43"
    # "1 kW" is not an echo of "W": the k stays part of the unit, value stays 1.
    assert parse_value("1 kW", "W").value == "1"
    assert parse_value("1 kW", "W").unit == "kW"


def test_categorical_questions_only_accept_bare_numbers() -> None:
    # answer_unit is_blank marks categorical/True-False questions.
    assert parse_value("4 bit quantization", "is_blank").kind == "text"
    assert parse_value("40", "is_blank").value == "40"
    assert parse_value("TRUE", "is_blank").value == "1"
    # With no expected unit the same text reads as a number with a unit.
    assert parse_value("4 bit quantization").value == "4"


@pytest.mark.parametrize(
    ("value", "blank"),
    [
        ("is_blank", True),
        (" IS_BLANK ", True),
        ("", True),
        (None, True),
        ("NA", True),
        ("n/a", True),
        ("nan", True),
        ("null", True),
        ("Unable to answer with confidence based on the provided documents.", True),
        ("unable to answer with confidence", True),
        ("0", False),
        ("blank", False),
        ("GPT-3", False),
    ],
)
def test_is_blank_value(value: str | None, blank: bool) -> None:
    assert is_blank_value(value) is blank


def test_canon_text_ignores_case_punctuation_leading_article_whitespace() -> None:
    assert canon_text("The ML.ENERGY Benchmark") == canon_text("ML.ENERGY Benchmark") == "ml energy benchmark"
    assert canon_text("  water   CONSUMPTION. ") == canon_text("Water consumption")
    assert canon_text("GPT-3") == canon_text("gpt 3")
    assert canon_text("GPT-3") != canon_text("GPT-4")
    # Only a leading article is phrasing; inside a name it is content.
    assert canon_text("Mixture of a Experts") != canon_text("Mixture of Experts")


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("['chung2025']", ("chung2025",)),
        ("['wu2021b','patterson2021']", ("wu2021b", "patterson2021")),  # train q075
        ("['dodge2022', 'strubell2019']", ("dodge2022", "strubell2019")),  # space after comma
        ('["dodge2022","strubell2019"]', ("dodge2022", "strubell2019")),  # JSON quotes
        ("[dodge2022, strubell2019]", ("dodge2022", "strubell2019")),  # no quotes
        ("luccioni2025b", ("luccioni2025b",)),  # train q207: bare id
        ("dodge2022, strubell2019", ("dodge2022", "strubell2019")),
        ("dodge2022; strubell2019", ("dodge2022", "strubell2019")),
        ("  [' Chung2025 ']  ", ("chung2025",)),  # case and whitespace
        ("['a','a','b']", ("a", "b")),  # duplicates dropped, order kept
        ("is_blank", ()),
        ("[]", ()),
        ("", ()),
        (None, ()),
        (["Wu2021b", "['patterson2021']"], ("wu2021b", "patterson2021")),
        (("is_blank",), ()),
    ],
)
def test_parse_ref_ids(text: object, ids: tuple[str, ...]) -> None:
    assert parse_ref_ids(text) == ids  # type: ignore[arg-type]


def test_resolve_ref_ids_fixes_typos_but_not_ambiguous_ids() -> None:
    assert "cottier2025" not in KNOWN_IDS
    assert resolve_ref_ids(("cottier2025",), KNOWN_IDS) == ("cottier2024",)  # README's typo
    assert resolve_ref_ids(("strubel2019",), KNOWN_IDS) == ("strubell2019",)
    assert resolve_ref_ids(("Chung2025",), KNOWN_IDS) == ("chung2025",)
    # luccioni2025a/b/c tie for luccioni2025d, wu2021a/b for wu2021: left alone.
    assert resolve_ref_ids(("luccioni2025d", "wu2021"), KNOWN_IDS) == ("luccioni2025d", "wu2021")
    assert resolve_ref_ids(("zzz1999",), KNOWN_IDS) == ("zzz1999",)
    # A typo resolving onto an id already cited is not repeated.
    assert resolve_ref_ids(("cottier2024", "cottier2025"), KNOWN_IDS) == ("cottier2024",)


def _llm(value: str, answer: str = "", unit: str = "", refs: tuple[str, ...] = ("chung2025",)) -> Answer:
    return Answer(answer=answer, answer_value=value, answer_unit=unit, ref_id=refs, explanation="from the paper")


def test_normalise_answer_numbers_take_the_question_unit() -> None:
    out = normalise_answer(_llm("$2.51 million", "$2.51 million", "dollars"), expected_unit="USD")
    assert (out.answer_value, out.answer_unit, out.answer) == ("2510000", "USD", "$2.51 million")
    assert out.supporting_materials == "is_blank" and out.explanation == "from the paper"


def test_normalise_answer_without_expected_unit_uses_the_implied_one() -> None:
    out = normalise_answer(_llm("5.439 million liters"))
    assert (out.answer_value, out.answer_unit, out.answer) == ("5439000", "liters", "5439000 liters")
    out = normalise_answer(_llm("85.5%"))
    assert (out.answer_value, out.answer_unit) == ("85.5", "percent")
    out = normalise_answer(_llm("300 to 1000", unit="W"))
    assert (out.answer_value, out.answer_unit) == ("[300,1000]", "W")


def test_normalise_answer_booleans() -> None:
    for value, answer, want in [("True", "", ("TRUE", "1")), ("no", "", ("FALSE", "0")), ("1", "TRUE", ("TRUE", "1"))]:
        out = normalise_answer(_llm(value, answer, unit="whatever"), expected_unit="is_blank")
        assert (out.answer, out.answer_value, out.answer_unit) == (*want, "is_blank")
    # The answer word overrules a digit that contradicts it.
    assert normalise_answer(_llm("1", "False"), expected_unit="is_blank").answer_value == "0"
    # A bare 1 without a TRUE/FALSE answer stays a number.
    assert normalise_answer(_llm("1", "1 paper"), expected_unit="papers").answer == "1 paper"


def test_expand_stated_magnitude_reads_the_models_own_words() -> None:
    assert expand_stated_magnitude("5.4", "liters", ["a total of 5.4 million liters"]) == "5400000"
    assert expand_stated_magnitude("2.51", "USD", ["", "$2.51 billion in Iowa"]) == "2510000000"
    assert expand_stated_magnitude("2.5", "million USD", ["2.5 million"]) == "2.5"  # the unit carries it
    assert expand_stated_magnitude("12.5", "USD", ["2.5 million"]) == "12.5"  # another numeral
    assert expand_stated_magnitude("2.5", "USD", ["2.5 millionaires"]) == "2.5"
    assert expand_stated_magnitude("[2,5]", "USD", ["2 million"]) == "[2,5]"


def test_expand_stated_magnitude_reads_a_money_amounts_short_suffix() -> None:
    """A money amount's short suffix scales the value ("$800M" is 800000000). A short suffix
    counts only after a currency sign: "JetMoE-8B" is a name, not 8 billion."""
    assert expand_stated_magnitude("800", "USD", ["800", "The cost is $800M."]) == "800000000"
    assert expand_stated_magnitude("2.5", "USD", ["US$ 2.5bn"]) == "2500000000"
    assert expand_stated_magnitude("120", "EUR", ["€120k"]) == "120000"
    assert expand_stated_magnitude("8", "experts", ["JetMoE-8B has 8 experts"]) == "8"
    assert expand_stated_magnitude("40", "kWh", ["40 MWh"]) == "40"
    assert expand_stated_magnitude("800", "USD", ["$800 Million"]) == "800000000"


def test_normalise_answer_keeps_categorical_text() -> None:
    out = normalise_answer(_llm('"The ML.ENERGY Benchmark"', "The ML.ENERGY Benchmark"), expected_unit="is_blank")
    assert (out.answer_value, out.answer, out.answer_unit) == (
        "The ML.ENERGY Benchmark",
        "The ML.ENERGY Benchmark",
        "is_blank",
    )


def test_normalise_answer_blank_keeps_unit_and_drops_evidence() -> None:
    out = normalise_answer(_llm("is_blank", refs=("patterson2021",)), expected_unit="MWh")
    assert out == Answer.blank("MWh")
    assert (out.answer, out.answer_value, out.ref_id, out.supporting_materials) == (
        BLANK_TEXT,
        "is_blank",
        (),
        "is_blank",
    )
    flagged = Answer("42", "42", "MWh", ("a",), is_blank=True)
    assert normalise_answer(flagged).is_blank


def test_normalise_answer_resolves_and_drops_ref_ids_with_known_ids() -> None:
    out = normalise_answer(_llm("3", refs=("Cottier2025", "made_up2030", "chung2025")), known_ref_ids=KNOWN_IDS)
    assert out.ref_id == ("cottier2024", "chung2025")


def test_every_train_answer_text_normalises_to_its_answer_value() -> None:
    """The train file's human-readable `answer` ("5.439 million liters", "80-90%", "$2.51
    million", "~13 days", "TRUE") read with its unit gives the gold answer_value; q003 is
    the one categorical row whose answer ("The ML.ENERGY Benchmark") differs in text."""
    questions = load_questions(WATTBOT / "train_QA.csv")
    differing = {}
    for q in questions:
        assert q.gold is not None
        assert canonical_value(q.gold.answer_value, q.answer_unit) == q.gold.answer_value  # idempotent
        if canonical_value(q.gold.answer, q.answer_unit) != q.gold.answer_value:
            differing[q.id] = q.gold.answer
    assert differing == {"q003": "The ML.ENERGY Benchmark"}
    assert canon_text(differing["q003"]) == canon_text("ML.ENERGY Benchmark")


# ── load_questions ─────────────────────────────────────────────────────────


def test_load_train_questions() -> None:
    questions = load_questions(WATTBOT / "train_QA.csv")
    by_id = {q.id: q for q in questions}
    assert len(questions) == 41
    assert all(q.gold is not None for q in questions)
    assert sorted(q.id for q in questions if q.gold.is_blank) == ["q062", "q164"]  # type: ignore[union-attr]
    # Unanswerable rows keep their unit filled.
    assert (by_id["q062"].answer_unit, by_id["q164"].answer_unit) == ("MWh", "lbs")
    assert by_id["q062"].gold.ref_id == ()  # type: ignore[union-attr]
    assert by_id["q207"].gold.ref_id == ("luccioni2025b",)  # type: ignore[union-attr]
    assert by_id["q075"].gold.ref_id == ("wu2021b", "patterson2021")  # type: ignore[union-attr]
    assert (by_id["q003"].gold.answer, by_id["q003"].gold.answer_value) == (  # type: ignore[union-attr]
        "The ML.ENERGY Benchmark",
        "ML.ENERGY Benchmark",
    )
    assert by_id["q153"].gold.supporting_materials.count("\n") == 1  # type: ignore[union-attr]  # quoted newline


def test_load_full_test_file_with_bom_and_crlf() -> None:
    raw = (WATTBOT / "test_Q_full.csv").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw  # the quirks are really there
    questions = load_questions(WATTBOT / "test_Q_full.csv")
    assert len(questions) == 282
    assert questions[0].id == "q001" and questions[0].answer_unit == "percent"
    assert all(q.gold is None for q in questions)
    assert not any("\r" in q.question or "\r" in q.answer_unit or "\ufeff" in q.id for q in questions)
    assert questions[1].question.startswith("In 2023, what was the estimated amount of cars")  # quoted comma


def test_load_questions_without_answer_columns(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_bytes(
        '\ufeffid,question,answer_unit\r\nq1,"How much, in total?",MWh\r\nq2,"Multi\r\nline",\r\n'.encode()
    )
    questions = load_questions(path)
    assert [(q.id, q.question, q.answer_unit, q.gold) for q in questions] == [
        ("q1", "How much, in total?", "MWh", None),
        ("q2", "Multi\r\nline", "is_blank", None),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("id,question\nq1,x\n", "missing column(s) answer_unit"),
        ("id,question,answer_unit\nq1,x,MWh\nq1,y,MWh\n", "'q1' appears more than once"),
        ("id,question,answer_unit\n,x,MWh\n", "row 2 has an empty id"),
        ("id,question,answer_unit\nq1,x,MWh,extra\n", "row 2 has more fields than the header"),
    ],
)
def test_load_questions_rejects_bad_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        load_questions(path)
    assert str(path) in str(info.value)


def test_an_error_about_a_file_that_is_not_a_question_csv_never_shows_its_content(tmp_path: Path) -> None:
    """`--questions /etc/passwd`, a .env file: the error names the file and what is wrong,
    never a line of it; a folder or a binary file is a clear error too, not a traceback."""
    secret = "root:x:0:0:root:/root:/bin/bash"
    for name, content in (("passwd", f"{secret}\nuser:x:1000\n"), (".env", "API_KEY=sk-live-1234567890abcdef\n")):
        path = tmp_path / name
        path.write_text(content)
        with pytest.raises(ValueError, match="missing column") as info:
            load_questions(path)
        text = str(info.value)
        assert str(path) in text and "not shown" in text
        assert "root:/root" not in text and "sk-live" not in text and "API_KEY" not in text
    with pytest.raises(ValueError, match="header is \\['id', 'questoin'\\]"):  # a real header is still shown
        (tmp_path / "typo.csv").write_text("id,questoin\nq1,x\n")
        load_questions(tmp_path / "typo.csv")
    with pytest.raises(ValueError, match="cannot read the question file"):
        load_questions(tmp_path)
    from kohaku_rag.evaluation.submissions import load_submission

    with pytest.raises(ValueError, match="not shown") as info:  # `kohaku score --submission` alike
        load_submission(tmp_path / "passwd")
    assert "root:/root" not in str(info.value)
    (tmp_path / "long.csv").write_text('id,question,answer_unit\nq1,"' + "x" * 200_000 + '",W\n')
    with pytest.raises(ValueError, match="not a CSV question file .*field larger than field limit"):
        load_questions(tmp_path / "long.csv")


def test_load_questions_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="question file not found"):
        load_questions(tmp_path / "nope.csv")


def test_answer_ref_id_must_be_a_tuple() -> None:
    with pytest.raises(TypeError, match="tuple"):
        Answer("a", "a", "is_blank", ["x"])  # type: ignore[arg-type]


def test_unit_factor_converts_si_prefixes_of_one_unit_only() -> None:
    from decimal import Decimal

    from kohaku_rag.answers.normalise import in_unit, parse_value, unit_factor

    assert unit_factor("kW", "MW") == Decimal("0.001")
    assert unit_factor("W", "MW") == Decimal("0.000001")
    assert unit_factor("GWh", "MWh") == Decimal(1000)
    assert unit_factor("kgCO2e", "tCO2e") is None  # different bases (grams vs tonnes)
    assert unit_factor("Wh", "MW") is None and unit_factor("MW", "MW") is None and unit_factor("kg", "cm") is None
    assert in_unit(parse_value("1500 kW"), "MW").value == "1.5"
    assert in_unit(parse_value("1000-2000 kW"), "MW").value == "[1,2]"
    assert in_unit(parse_value("1500 kW"), "is_blank").value == "1500"
