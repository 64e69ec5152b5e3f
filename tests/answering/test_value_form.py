"""A value is of the form its question asks, or it is not an answer; scientific notation is
read; an explanation the model ran into its length cap ends at a sentence or a word."""

from __future__ import annotations

import json

import pytest

from kohaku_rag.answering.reply import ended, parse_reply
from kohaku_rag.answers.normalise import parse_value
from kohaku_rag.answers.records import Answer, Question
from kohaku_rag.answers.value_form import form_problem

CONTEXT = ["The cluster used 1,200 kWh in run C. The framework was CodeCarbon, run by the Hivemind team."]


def reply(value: str, words: str = "", explanation: str = "") -> str:
    return json.dumps({"explanation": explanation, "answer": words, "answer_value": value, "ref_id": ["a"],
                       "is_blank": False})  # fmt: skip


def problem(question: str, unit: str, value: str, context: list[str] = CONTEXT) -> str | None:
    q = Question("q1", question, unit)
    return form_problem(q, parse_reply(reply(value), q, ["a"]), context)


def shown_as_value(question: str, unit: str, value: str) -> bool:
    """Whether the answerer would show `value` as an answer: read, and of the asked form."""
    q = Question("q1", question, unit)
    answer = parse_reply(reply(value), q, ["a"])
    return not answer.is_blank and form_problem(q, answer, CONTEXT) is None


@pytest.mark.parametrize("unit", ["kWh", "MWh", "percent", "GPUs", "tCO2e", "hours"])
@pytest.mark.parametrize(
    "copied",
    [
        "the answer in {unit}",
        "the answer in a few words",
        "only the number in {unit} (no unit, no commas)",
        "a number in {unit}",
        "The answer, in {unit}",
        "see the context",
    ],
)
def test_a_reply_that_copies_a_rule_with_any_unit_is_never_an_answer(unit: str, copied: str) -> None:
    """Before: only the listed phrases were caught, so "the answer in kWh" was shown as a value."""
    assert not shown_as_value("How much device energy did run C use?", unit, copied.format(unit=unit))
    found = problem("How much device energy did run C use?", unit, f"the answer in {unit}")
    assert found == f"the reply's value 'the answer in {unit}' is not a number in {unit}"


def test_a_name_question_takes_a_name_the_passages_use() -> None:
    asked = "Which framework measured the emissions?"
    assert problem(asked, "is_blank", "CodeCarbon") is None
    assert problem(asked, "is_blank", "the hivemind team") is None
    assert problem(asked, "is_blank", "2021") is None  # a number (a year) is a value too
    found = problem(asked, "is_blank", "a term from its passages")
    assert found is not None and "not a name or term the cited passages use" in found
    assert not shown_as_value(asked, "is_blank", "the answer in a few words")
    assert not shown_as_value(asked, "is_blank", "the exact name or term as written")


def test_true_false_ranges_and_lists_of_numbers_pass() -> None:
    assert problem("True or False: run C used more than 1 MWh.", "is_blank", "TRUE") is None
    assert problem("What is the range of energy per run?", "kWh", "[1200,1500]") is None
    assert problem("What energy did runs B and C use, respectively?", "kWh", "(1200, 900)") is None
    assert problem("What energy did runs B and C use, respectively?", "kWh", "(lots, some)") is not None


def test_an_abstention_is_of_every_form() -> None:
    q = Question("q1", "How much?", "kWh")
    assert form_problem(q, Answer.blank("kWh"), CONTEXT) is None


@pytest.mark.parametrize(
    "written", ["(3.3,10^18)", "3.3×10^18", "3.3 x 10^18", "3.3*10**18", "3.3 × 10¹⁸", "3.3e18", "(3.3×10^18)"]
)
def test_scientific_notation_is_read(written: str) -> None:
    """Before: "(3.3,10^18)" was shown as the value, a list of two numbers."""
    assert parse_value(written, "FLOPs").value == "3300000000000000000"
    assert problem("How many FLOPs did training take?", "FLOPs", written) is None


def test_plain_numbers_and_pairs_are_not_taken_for_powers() -> None:
    assert parse_value("10 GPUs", "GPUs").value == "10"
    assert parse_value("2010", "is_blank").value == "2010"
    assert parse_value("1.5 × 10^-3", "kWh").value == "0.0015"
    assert parse_value("(3, 5)", "GPUs").value != "3e5"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("The paper states that the Transformer big (213", "The paper states that the Transformer big…"),
        ("BERT uses 1,507 kWh. Table 3 compares it with GPT-2, whose training took more than that due to BERT",
         "BERT uses 1,507 kWh. Table 3 compares it with GPT-2, whose training took more than that due to…"),
        ("Run C used 1,200 kWh in total. The cluster ran for three days and the paper says the energy was due t",
         "Run C used 1,200 kWh in total. The cluster ran for three days and the paper says the energy was due…"),
        ("The cluster used 1,200 kWh in run C, the paper says, and 900 kWh in run B. It ran on A100 GPUs all week",
         "The cluster used 1,200 kWh in run C, the paper says, and 900 kWh in run B."),
    ],
)  # fmt: skip
def test_an_explanation_that_hit_its_cap_ends_at_a_sentence_or_a_word(text: str, shown: str) -> None:
    """Before: the explanation was shown as the model left it at 120 characters, mid-word."""
    cut = ended(text, len(text))
    assert cut == shown
    assert not cut[-1].isalnum() or cut.endswith(".")


def test_an_explanation_the_model_ended_itself_is_kept() -> None:
    assert ended("Run C used 1,200 kWh", 120) == "Run C used 1,200 kWh"
    q = Question("q1", "How much device energy did run C use?", "kWh")
    long = "Run C used 1,200 kWh of device energy, the report states in its second table of measured runs at (4"
    answer = parse_reply(reply("1200", "1200 kWh", long), q, ["a"], explanation_cap=len(long))
    assert answer.explanation.endswith("…") and "(4" not in answer.explanation
